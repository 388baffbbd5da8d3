package app

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
)

// applyConfigNamespaces applies, on the meta leader of a cluster with
// data groups, what the config file says of its namespaces beyond the
// default one's entities (applyConfigLoop applies those): the default
// namespace's rules and limits, and every other namespace, created when
// missing, with its rules, limits and entities, each set of entities
// joined by forwarding placed together first. As applyNamespaces does on
// one node, the file's rules and limits replace those set at run time,
// and a namespace absent from the file is left alone.
func (r *routed) applyConfigNamespaces(ctx context.Context) error {
	reg := r.namespaces()
	if reg == nil {
		return &core.Error{Code: core.CodeServerBusy, Msg: "the namespace registry is not open yet"}
	}
	for i, n := range r.config.Namespaces {
		ns := reg.Default()
		if i > 0 {
			var err error
			ns, err = reg.Get(n.Name)
			if errors.Is(err, core.ErrNotFound) {
				ns, err = reg.CreateWithLimits(ctx, n.Name, n.AuthorizationRules, n.Limits)
			}
			if err != nil {
				return fmt.Errorf("config: namespace %q: %w", n.Name, err)
			}
		}
		if err := r.applyNamespaceConfig(ctx, reg, ns, n.AuthorizationRules, n.Limits, n.HasLimits); err != nil {
			return fmt.Errorf("config: namespace %q: %w", n.Name, err)
		}
		if i == 0 {
			continue
		}
		if err := r.placeForwardingTogether(ctx, qualifyEntities(ns.Record().ID, n.Entities)); err != nil {
			return fmt.Errorf("config: namespace %q: %w", n.Name, err)
		}
		if err := applyConfig(ns.Broker(), n.Entities); err != nil {
			return fmt.Errorf("config: namespace %q: %w", n.Name, err)
		}
	}
	return nil
}

// applyNamespaceConfig gives ns the file's rules (when it lists any) and
// limits (when it has them), writing only what differs.
func (r *routed) applyNamespaceConfig(ctx context.Context, reg *namespace.Registry, ns *namespace.Namespace,
	rules []core.AuthorizationRule, limits namespace.Limits, hasLimits bool) error {
	if hasLimits && ns.OwnLimits() != limits {
		if _, err := reg.SetLimits(ctx, ns.Name(), limits); err != nil {
			return err
		}
	}
	if len(rules) > 0 && !reflect.DeepEqual(ns.Rules(), rules) {
		if _, err := reg.SetRules(ctx, ns.Name(), rules); err != nil {
			return err
		}
	}
	return nil
}

// qualifyEntities is entities with every queue or topic they name (their
// own, a subscription's topic, their forwarding targets) as placement
// names of namespace ns, for placeForwardingTogether.
func qualifyEntities(ns uint64, entities []core.Entity) []core.Entity {
	out := make([]core.Entity, len(entities))
	for i, e := range entities {
		e.Name = qualify(ns, e.Name)
		if e.Topic != "" {
			e.Topic = qualify(ns, e.Topic)
		}
		if name := core.ParseAddress(e.ForwardTo).Entity; name != "" {
			e.ForwardTo = qualify(ns, name)
		}
		if name := core.ParseAddress(e.ForwardDeadLetteredMessagesTo).Entity; name != "" {
			e.ForwardDeadLetteredMessagesTo = qualify(ns, name)
		}
		out[i] = e
	}
	return out
}
