package core

import (
	"context"
	"strings"

	"go.uber.org/zap"
)

// Client-affine subscriptions: what Service Bus Premium makes when a JMS
// client consumes from a topic (JMS 2.0's durable, shared and non-durable
// subscriptions; ARM calls them clientAffineProperties). The subscription
// is named after the JMS subscription name, the client id it belongs to
// and its durability, "<name>$<client id>$D" or "<name>$<client id>$ND",
// with the client id empty ("<name>$$D") for a shared subscription made
// without one. Such names carry '$', which no other subscription name
// may, so they never collide with one made through management.

// ClientAffine says whose a client-affine subscription is.
type ClientAffine struct {
	ClientID string // the JMS client id; "" for a shared one made without (global)
	Durable  bool   // kept when its consumers go; else deleted with the last
	Shared   bool   // several consumers may use it at once
}

// ClientAffineName returns the subscription name of JMS subscription
// name on client id clientID ("" for none).
func ClientAffineName(name, clientID string, durable bool) string {
	if durable {
		return name + "$" + clientID + "$D"
	}
	return name + "$" + clientID + "$ND"
}

// checkName checks that name is the client-affine name of a JMS
// subscription name valid as a subscription name, for c's client id.
func (c *ClientAffine) checkName(name string) error {
	base, _, ok := strings.Cut(name, "$")
	if !ok {
		return errf(CodeBadRequest, "The client-affine subscription name '%s' has no '$'.", name)
	}
	if err := checkLeafName("subscription", base); err != nil {
		return err
	}
	if strings.ContainsAny(c.ClientID, "/\\?#") || strings.ContainsFunc(c.ClientID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errf(CodeBadRequest, "The client id '%s' contains a character a subscription name cannot carry ('/', '\\\\', '?', '#' or a control character).", c.ClientID)
	}
	if want := ClientAffineName(base, c.ClientID, c.Durable); name != want {
		return errf(CodeBadRequest, "The client-affine subscription name '%s' should be '%s'.", name, want)
	}
	if len(name) > MaxPathNameLength {
		return errf(CodeBadRequest, "Entity path '%s' exceeds the '%d' character limit.", truncateName(name), MaxPathNameLength)
	}
	return nil
}

// dropNonDurableClientAffine deletes, at start, the non-durable
// client-affine subscriptions a previous run left: their consumers were
// on connections that are gone, so nothing can use them again (a front
// deletes them with their last link while it runs). A failure is
// logged: the subscription stays, and the start goes on.
func (b *Broker) dropNonDurableClientAffine() {
	b.mu.RLock()
	var paths []string
	for _, e := range b.mu.entities {
		if d := e.desc.Load(); d.ClientAffine != nil && !d.ClientAffine.Durable {
			paths = append(paths, d.Path())
		}
	}
	b.mu.RUnlock()
	for _, p := range paths {
		if err := b.DeleteEntity(context.Background(), p); err != nil {
			b.log.Warn("could not delete a non-durable JMS subscription left by the previous run", zap.String("subscription", p), zap.Error(err))
		}
	}
}
