package core

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/omnibusmq/omnibus/storage"
)

// AddRule adds a rule to the subscription at path. A name already in use
// fails with [ErrEntityExists].
func (b *Broker) AddRule(ctx context.Context, path string, r Rule) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.AddRule(ctx, path, r)
	}
	b.manage.Lock()
	defer b.manage.Unlock()
	ent, err := b.subscription(path)
	if err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	for _, x := range ent.currentRules() {
		if strings.EqualFold(x.Name, r.Name) {
			return errf(CodeEntityExists, "The rule '%s' already exists on '%s'.", r.Name, path)
		}
	}
	r.CreatedAt = nanosToTime(b.Now())
	c, err := compileRule(&r)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	batch := storage.Batch{Sync: true}
	batch.Set(nameKey(tabRule, ent.id, strings.ToLower(r.Name)), v)
	if err := b.apply(&batch); err != nil {
		return err
	}
	rules := append(ent.currentRules(), c)
	ent.rules.Store(&rules)
	ent.touch(b.Now())
	return nil
}

// RemoveRule deletes a rule by name; an unknown name fails with
// [ErrRuleNotFound].
func (b *Broker) RemoveRule(ctx context.Context, path, name string) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.RemoveRule(ctx, path, name)
	}
	b.manage.Lock()
	defer b.manage.Unlock()
	ent, err := b.subscription(path)
	if err != nil {
		return err
	}
	cur := ent.currentRules()
	for i, x := range cur {
		if strings.EqualFold(x.Name, name) {
			batch := storage.Batch{Sync: true}
			batch.Delete(nameKey(tabRule, ent.id, strings.ToLower(x.Name)))
			if err := b.apply(&batch); err != nil {
				return err
			}
			rules := append(cur[:i:i], cur[i+1:]...)
			ent.rules.Store(&rules)
			return nil
		}
	}
	return errf(CodeRuleNotFound, "The messaging entity '%s/Rules/%s' could not be found.", path, name)
}

// ListRules returns the subscription's rules in creation order.
func (b *Broker) ListRules(path string) ([]Rule, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.ListRules(path)
	}
	ent, err := b.subscription(path)
	if err != nil {
		return nil, err
	}
	cur := ent.currentRules()
	out := make([]Rule, len(cur))
	for i, c := range cur {
		out[i] = c.Rule
	}
	return out, nil
}

func (b *Broker) subscription(path string) (*entity, error) {
	a := ParseAddress(path)
	if a.Sub == "" || a.DeadLetter {
		return nil, errf(CodeBadRequest, "'%s' is not a subscription", path)
	}
	return b.lookup(a)
}

// currentRules returns a copy of the rule list (copy-on-write).
func (e *entity) currentRules() []*compiledRule {
	p := e.rules.Load()
	if p == nil {
		return nil
	}
	return append([]*compiledRule(nil), (*p)...)
}
