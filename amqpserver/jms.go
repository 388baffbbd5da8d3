package amqpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// JMS topic subscriptions, as Service Bus Premium serves Qpid JMS (the
// client Microsoft's azure-servicebus-jms library wraps). A JMS consumer
// on a topic attaches a receiver whose source names the topic itself,
// with the capability "topic" (without it, as the SDKs attach, a
// receiver on a topic is refused with amqp:not-allowed);
// the broker makes the subscription behind it (a client-affine one,
// core/clientaffine.go) and delivers from that:
//
//   - durable (source durable unsettled-state, expiry never): the JMS
//     subscription name is the link name (for shared ones, up to the '|'
//     Qpid adds to the second and later links: "name|2", "name|global");
//     the subscription is "<name>$<client id>$D", where the client id is
//     the connection's container-id (Qpid sends the JMS client id there),
//     or empty when the source has the capability "global" (a shared
//     subscription made without a client id). It outlives its consumers
//     until JMSContext.unsubscribe;
//   - non-durable: "<name>$<client id>$ND" for a shared one ("name|volatile1",
//     "name|global-volatile1"), a generated name for a plain consumer; it
//     is deleted when the last link on it, or its connection, goes;
//   - a JMS message selector (the source filter described as
//     apache.org:selector-filter:string) becomes the subscription's SQL
//     filter, JMSMessageID, JMSCorrelationID and JMSType read from the
//     message's properties (selectorSQL); no-local filters are ignored,
//     as Service Bus ignores them.
//
// Unsubscribe attaches a receiver with the subscription's link name and
// no source: the attach is answered with the subscription's source, and
// the closing detach that follows deletes the subscription; for an
// unknown one the answer has no source, then a detach with amqp:not-found.
// Making a subscription needs Manage rights on the topic; consuming from
// one that exists, Listen.

// AMQP names of the JMS mapping (Qpid JMS's AmqpSupport).
const (
	capShared         encoding.Symbol = "shared"
	capGlobal         encoding.Symbol = "global"
	capTopic          encoding.Symbol = "topic"
	capSharedSubs     encoding.Symbol = "SHARED-SUBS"
	jmsSelectorName   encoding.Symbol = "apache.org:selector-filter:string"
	jmsSelectorCode   uint64          = 0x0000468C00000004
	jmsLinkNameMarker                 = "|"
)

// jmsSubscription is what a JMS consumer's attach asks for.
type jmsSubscription struct {
	topic    string
	name     string // the subscription's name on the topic
	affine   core.ClientAffine
	selector string
}

// path is the subscription's entity path.
func (j *jmsSubscription) path() string { return j.topic + "/Subscriptions/" + j.name }

// isJMSTopic reports whether a source's capabilities name a JMS topic or
// temporary topic.
func isJMSTopic(caps []encoding.Symbol) bool {
	return hasCapability(caps, capTopic) || hasCapability(caps, capTempTopic)
}

// hasCapability reports whether caps has c.
func hasCapability(caps []encoding.Symbol, c encoding.Symbol) bool {
	for _, x := range caps {
		if x == c {
			return true
		}
	}
	return false
}

// jmsSubscriptionFor maps a receiver's attach to a topic onto the
// subscription it consumes from.
func (c *conn) jmsSubscriptionFor(topic string, a *frames.Attach) (*jmsSubscription, *frames.Error) {
	src := a.Source
	shared := hasCapability(src.Capabilities, capShared)
	global := hasCapability(src.Capabilities, capGlobal)
	durable := src.Durable != frames.DurabilityNone
	j := &jmsSubscription{topic: topic, affine: core.ClientAffine{Durable: durable, Shared: shared}}
	if !global {
		j.affine.ClientID = c.containerID
	}
	base := a.Name
	switch {
	case shared:
		base, _, _ = strings.Cut(a.Name, jmsLinkNameMarker)
	case !durable:
		// A plain consumer: a subscription of its own, gone with it.
		var b [8]byte
		rand.Read(b[:])
		base = "jms-" + hex.EncodeToString(b[:])
	}
	j.name = core.ClientAffineName(base, j.affine.ClientID, durable)
	if v, ok := jmsSelector(src.Filter); ok {
		s, ok := v.(string)
		if !ok {
			return nil, errorf(frames.CondInvalidField, "The JMS selector filter must be a string.")
		}
		j.selector = strings.TrimSpace(s)
	}
	return j, nil
}

// jmsSelector finds the selector in a filter set: the value described
// as apache.org:selector-filter:string (by code or name) whatever its
// key (Qpid JMS uses "jms-selector").
func jmsSelector(filters encoding.Map) (any, bool) {
	for _, kv := range filters {
		d, ok := kv.Value.(encoding.Described)
		if !ok {
			continue
		}
		switch desc := d.Descriptor.(type) {
		case uint64:
			if desc == jmsSelectorCode {
				return d.Value, true
			}
		case encoding.Symbol:
			if desc == jmsSelectorName {
				return d.Value, true
			}
		}
	}
	return nil, false
}

// rule is the subscription's rule: the selector's SQL filter, or $Default.
func (j *jmsSubscription) rule() core.Rule {
	if j.selector == "" {
		return core.DefaultRule()
	}
	return core.Rule{Name: "jms-selector", Filter: core.Filter{Kind: core.FilterSQL, SQL: selectorSQL(j.selector)}}
}

// errJMSSelectorInUse refuses a JMS consumer whose selector differs from
// that of the subscription other consumers use.
var errJMSSelectorInUse = errors.New("amqpserver: the JMS subscription is in use with another selector")

// sameRule reports whether the existing subscription's rules are j's one
// rule (same filter; a subscription made by management may differ).
func (j *jmsSubscription) sameRule(b *core.Broker) bool {
	rules, err := b.ListRules(j.path())
	if err != nil || len(rules) != 1 {
		return err != nil // unknown: keep it
	}
	want := j.rule()
	return rules[0].Filter.Kind == want.Filter.Kind && rules[0].Filter.SQL == want.Filter.SQL
}

// jmsHeaders are the JMS header fields a selector may name that Qpid JMS
// carries in the message's AMQP properties, with the system property of
// Service Bus's SQL filters that reads them.
var jmsHeaders = map[string]string{
	"JMSMessageID":     "sys.MessageId",
	"JMSCorrelationID": "sys.CorrelationId",
	"JMSType":          "sys.Label", // the AMQP subject
}

// selectorSQL returns a JMS selector as a Service Bus SQL filter: the
// grammar is the same (SQL-92 conditional expressions), only the JMS
// header fields of jmsHeaders become system properties. Identifiers in
// quoted strings, and qualified ones ("user.JMSType"), stay as written.
func selectorSQL(sel string) string {
	var b strings.Builder
	isIdent := func(c byte) bool {
		return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(sel); {
		c := sel[i]
		switch {
		case c == '\'':
			j := i + 1
			for j < len(sel) {
				if sel[j] == '\'' {
					if j+1 < len(sel) && sel[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(sel))
			b.WriteString(sel[i:j])
			i = j
		case isIdent(c) && (c < '0' || c > '9'):
			j := i
			for j < len(sel) && isIdent(sel[j]) {
				j++
			}
			word := sel[i:j]
			if sys, ok := jmsHeaders[word]; ok && (i == 0 || sel[i-1] != '.') && (j == len(sel) || sel[j] != '.') {
				word = sys
			}
			b.WriteString(word)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// attachJMSConsumer completes the attach of a receiver on topic: it finds
// or makes the subscription in a helper goroutine (making one is a store
// write), then attaches the link to it, echoing the client's source.
func (l *link) attachJMSConsumer(a *frames.Attach) {
	c := l.s.c
	j, e := c.jmsSubscriptionFor(l.entity, a)
	if e != nil {
		l.refuse(a, e)
		return
	}
	if _, err := c.broker().GetEntity(j.path()); err != nil && !c.auth.allows(j.topic, sas.Manage) {
		l.refuse(a, errorf(frames.CondUnauthorizedAccess,
			"Unauthorized access. 'Manage' claim(s) are required to create the subscription '%s' for a JMS consumer. Resource: '%s'.", j.name, j.topic))
		return
	}
	c.goWork(func() {
		err := c.srv.jms.ensure(c.ctx, c.namespace(), j)
		posted := c.post(func() {
			if err != nil {
				if !l.detached && l.s.live() {
					e := amqpError(err)
					if errors.Is(err, errJMSSelectorInUse) {
						e = errorf(frames.CondNotAllowed, "The JMS subscription '%s' is in use with another selector.", j.name)
					}
					l.refuse(a, e)
				}
				return
			}
			if l.detached || !l.s.live() {
				c.srv.jms.release(c, j.path())
				return
			}
			l.entity = j.path()
			l.jms = j
			l.attach(a, nil)
			l.pull()
		})
		if !posted && err == nil {
			c.srv.jms.release(c, j.path())
		}
	})
}

// jmsRegistry counts the links on each client-affine subscription, so
// that a non-durable one is deleted with its last link.
type jmsRegistry struct {
	mu    sync.Mutex
	links map[jmsKey]int // subscription → attached links
}

// jmsKey names a subscription: its namespace and path.
type jmsKey struct {
	ns   *namespace.Namespace
	path string
}

// ensure makes j's subscription unless it exists and counts a link on it.
func (r *jmsRegistry) ensure(ctx context.Context, ns *namespace.Namespace, j *jmsSubscription) error {
	b := ns.Broker()
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := b.GetEntity(j.path())
	if err == nil && !j.sameRule(b) {
		// JMS 2.0 (6.11.1, 6.11.2): a durable subscription asked for with
		// another selector is the old one deleted and a new one made;
		// refused while consumers use it.
		if r.links[jmsKey{ns, j.path()}] > 0 {
			return errJMSSelectorInUse
		}
		if err := b.DeleteEntity(ctx, j.path()); err != nil && core.CodeOf(err) != core.CodeNotFound {
			return err
		}
		_, err = b.GetEntity(j.path())
	}
	if err != nil {
		if core.CodeOf(err) != core.CodeNotFound {
			return err
		}
		affine := j.affine
		_, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindSubscription, Topic: j.topic, Name: j.name,
			ClientAffine: &affine, Rules: []core.Rule{j.rule()}})
		if err != nil && core.CodeOf(err) != core.CodeEntityExists {
			return err
		}
	}
	if r.links == nil {
		r.links = map[jmsKey]int{}
	}
	r.links[jmsKey{ns, j.path()}]++
	return nil
}

// release uncounts a link on the subscription at path and deletes the
// subscription, in a helper goroutine of c, when it was its last link
// and it is not durable.
func (r *jmsRegistry) release(c *conn, path string) {
	k := jmsKey{c.namespace(), path}
	r.mu.Lock()
	r.links[k]--
	last := r.links[k] <= 0
	if last {
		delete(r.links, k)
	}
	r.mu.Unlock()
	if !last {
		return
	}
	e, err := c.broker().GetEntity(path)
	if err != nil || e.ClientAffine == nil || e.ClientAffine.Durable {
		return
	}
	b, log := c.broker(), c.log
	// Not c.goWork: the connection may be ending, and the deletion must
	// happen all the same.
	go func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.links[k] > 0 {
			return // a link attached again meanwhile
		}
		if err := b.DeleteEntity(context.Background(), path); err != nil && core.CodeOf(err) != core.CodeNotFound {
			log.Warn("could not delete a JMS consumer's non-durable subscription", zap.String("subscription", path), zap.Error(err))
		}
	}()
}

// attachJMSLookup answers a receiver's attach without a source: Qpid
// JMS's unsubscribe, which names the durable subscription by its link
// name ("name", or "name|global" with the desired capabilities shared
// and global when the connection has no client id). The link is
// answered with the subscription's source; the client's closing detach
// then deletes it (handleDetach). An unknown name gets a null source and
// a detach with amqp:not-found.
func (l *link) attachJMSLookup(a *frames.Attach) {
	c := l.s.c
	clientID := c.containerID
	base := a.Name
	if hasCapability(a.DesiredCapabilities, capGlobal) {
		clientID = ""
		base, _, _ = strings.Cut(a.Name, jmsLinkNameMarker)
	}
	name := core.ClientAffineName(base, clientID, true)
	var found *core.Entity
	if topics, err := c.broker().ListEntities(core.KindTopic, ""); err == nil {
		for _, t := range topics {
			if e, err := c.broker().GetEntity(t.Name + "/Subscriptions/" + name); err == nil && e.ClientAffine != nil {
				found = e
				break
			}
		}
	}
	if found == nil {
		l.refuse(a, errorf(frames.CondNotFound, "The JMS subscription '%s' (client id '%s') does not exist.", base, clientID))
		return
	}
	if !c.auth.allows(found.Topic, sas.Manage) {
		l.refuse(a, errorf(frames.CondUnauthorizedAccess,
			"Unauthorized access. 'Manage' claim(s) are required to delete the subscription '%s'. Resource: '%s'.", found.Name, found.Topic))
		return
	}
	l.kind, l.entity, l.unsubscribe = nodeEntity, found.Path(), true
	l.need = sas.Manage
	caps := []encoding.Symbol{capTopic}
	if found.ClientAffine.Shared {
		caps = append(caps, capShared)
		if found.ClientAffine.ClientID == "" {
			caps = append(caps, capGlobal)
		}
	}
	reply := *a
	reply.Source = &frames.Source{Address: found.Topic, Durable: frames.DurabilityUnsettled,
		ExpiryPolicy: "never", Capabilities: caps}
	l.attach(&reply, nil)
}

// unsubscribed deletes the subscription an unsubscribe link found, once
// the client closed the link, then answers the detach (answer).
func (c *conn) unsubscribed(path string, answer func()) {
	c.goWork(func() {
		if err := c.broker().DeleteEntity(c.ctx, path); err != nil && !errors.Is(err, context.Canceled) && core.CodeOf(err) != core.CodeNotFound {
			c.log.Warn("could not delete an unsubscribed JMS subscription", zap.String("subscription", path), zap.Error(err))
		}
		c.post(answer)
	})
}
