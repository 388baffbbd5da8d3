package core

import (
	"context"
	"strings"
)

// routeGrouped is routeEntity over a [GroupRouter]. A new queue or topic
// that forwards (ForwardTo, else ForwardDeadLetteredMessagesTo) is placed
// in its target's group, so that its forwarding stays one write in one
// group. Forwarding that crosses groups all the same (a queue updated to
// forward elsewhere, a subscription of a topic placed in another group,
// two targets in two groups) goes by transfer (transfer.go). A target
// placed nowhere is left to the group's broker to report missing.
func (b *Broker) routeGrouped(ctx context.Context, gr GroupRouter, e Entity, create bool) (Backend, error) {
	if e.Kind == KindSubscription {
		return b.route(e.Topic)
	}
	if !create {
		return b.route(e.Name)
	}
	var want uint64
	for _, target := range []string{e.ForwardTo, e.ForwardDeadLetteredMessagesTo} {
		name := ParseAddress(target).Entity
		if name == "" || strings.EqualFold(name, e.Name) {
			continue
		}
		g, err := gr.Group(ctx, name)
		if err != nil {
			return nil, err
		}
		if g != 0 {
			want = g
			break
		}
	}
	return gr.PlaceIn(ctx, e.Name, want)
}
