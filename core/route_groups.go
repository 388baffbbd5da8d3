package core

import (
	"context"
	"strings"
)

// routeGrouped is routeEntity over a [GroupRouter]: e, created or
// updated, must live in the group of the entities it forwards to
// (ForwardTo, ForwardDeadLetteredMessagesTo), since its group's broker
// forwards only within the group. A new queue or topic is placed there;
// an entity placed in another group already (a queue updated to forward,
// a subscription of a topic placed elsewhere) is refused with a
// CodeBadRequest naming both groups, rather than the group's broker's
// "does not exist". A target placed nowhere is left to that broker to
// report missing.
func (b *Broker) routeGrouped(ctx context.Context, gr GroupRouter, e Entity, create bool) (Backend, error) {
	home := e.Name
	if e.Kind == KindSubscription {
		home = e.Topic
	}
	var want uint64
	var wantName string
	for _, target := range []string{e.ForwardTo, e.ForwardDeadLetteredMessagesTo} {
		name := ParseAddress(target).Entity
		if name == "" || strings.EqualFold(name, home) {
			continue
		}
		g, err := gr.Group(ctx, name)
		if err != nil {
			return nil, err
		}
		switch {
		case g == 0:
		case want == 0:
			want, wantName = g, name
		case g != want:
			return nil, errf(CodeBadRequest, "%s '%s' forwards to '%s' (data group %d) and to '%s' (data group %d): "+
				"cross-group forwarding is not supported in a cluster with data groups", e.Kind, e.Path(), wantName, want, name, g)
		}
	}
	if want != 0 {
		g, err := gr.Group(ctx, home)
		if err != nil {
			return nil, err
		}
		if g != 0 && g != want {
			return nil, errf(CodeBadRequest, "%s '%s' is in data group %d and its forwarding target '%s' in data group %d: "+
				"cross-group forwarding is not supported in a cluster with data groups", e.Kind, e.Path(), g, wantName, want)
		}
	}
	if create && e.Kind != KindSubscription {
		return gr.PlaceIn(ctx, e.Name, want)
	}
	return b.route(home)
}
