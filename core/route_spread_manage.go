package core

import (
	"context"
	"slices"
	"sync"
)

// Management and counts of a spread entity: every group holding some of
// its partitions holds the entity (and its subscriptions and rules), so a
// change goes to each of them; a description is partition 0's group's
// (another's when that one cannot answer now); counts and statistics add
// up.
//
// A change the groups take one after the other can stop half done (a
// group changing leaders): the client is told the retryable error, and
// its retry completes it. So a create that finds the entity in some
// groups and makes it in others succeeds, and fails as existing only
// where every group has it; a delete (or a rule's removal) succeeds where
// some group still had it.

// noSoft is eachGroup's soft for a change every group must make.
const noSoft = Code(255)

// eachGroup runs op on every group's backend in turn; it returns how many
// succeeded, how many failed with the code soft (nothing to do there),
// and the first other error.
func (s *spreadBackend) eachGroup(soft Code, op func(g uint64, be Backend) error) (ok, softs int, err error) {
	return s.eachGroupOf(s.sp.Distinct(), soft, op)
}

// eachGroupOf is eachGroup over gs, in that order.
func (s *spreadBackend) eachGroupOf(gs []uint64, soft Code, op func(g uint64, be Backend) error) (ok, softs int, err error) {
	var softErr error
	for _, g := range gs {
		be, e := s.be(g)
		if e == nil {
			e = op(g, be)
		}
		switch {
		case e == nil:
			ok++
		case CodeOf(e) == soft:
			softs++
			softErr = e
		default:
			return ok, softs, e
		}
	}
	if ok == 0 && softs > 0 {
		return 0, softs, softErr
	}
	return ok, softs, nil
}

// homeFirst runs op on partition 0's group, then on the others in turn
// while the answer is a refusal for now (server busy, outcome unknown).
func (s *spreadBackend) homeFirst(op func(be Backend) error) error {
	var err error
	for _, g := range s.sp.Distinct() {
		be, e := s.be(g)
		if e == nil {
			e = op(be)
		}
		switch CodeOf(e) {
		case CodeServerBusy, CodeOutcomeUnknown, CodeTimeout:
			if err == nil {
				err = e
			}
			continue
		}
		return e
	}
	return err
}

// public is d as a client sees it (the cluster's bookkeeping removed).
func public(d *Entity) *Entity {
	if d != nil {
		d.HeldPartitions = nil
	}
	return d
}

// CreateEntity implements Backend: in every group, each told its
// partitions (a subscription takes its topic's there).
func (s *spreadBackend) CreateEntity(ctx context.Context, e Entity) (*Entity, error) {
	if e.Kind != KindSubscription && !e.EnablePartitioning {
		// The name is spread: the entity exists, or its delete could
		// not have its placement forgotten.
		if _, err := s.GetEntity(e.Name); err == nil || CodeOf(err) != CodeNotFound {
			return nil, errf(CodeEntityExists, "The messaging entity '%s' already exists.", e.Path())
		}
		return nil, errf(CodeBadRequest, "%s '%s' was created partitioned before, spread over %d data groups, and can be created again only partitioned "+
			"(its placement outlived its delete)", e.Kind, e.Path(), len(s.sp.Distinct()))
	}
	var made *Entity
	_, _, err := s.eachGroup(CodeEntityExists, func(g uint64, be Backend) error {
		c := e
		c.Rules = append([]Rule(nil), e.Rules...)
		if e.Kind != KindSubscription {
			c.HeldPartitions = s.sp.Held(g)
		}
		d, err := be.CreateEntity(ctx, c)
		if err == nil && made == nil {
			made = d
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return public(made), nil
}

// UpdateEntity implements Backend: in every group.
func (s *spreadBackend) UpdateEntity(ctx context.Context, e Entity) (*Entity, error) {
	if e.Kind != KindSubscription && e.RequiresDuplicateDetection != s.sp.DupKeys {
		// Its messages' partitions depend on it (a MessageId is a key).
		return nil, errf(CodeBadRequest, "%s '%s': RequiresDuplicateDetection cannot be changed after creation", e.Kind, e.Path())
	}
	var first *Entity
	_, _, err := s.eachGroup(noSoft, func(_ uint64, be Backend) error {
		d, err := be.UpdateEntity(ctx, e)
		if err == nil && first == nil {
			first = d
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return public(first), nil
}

// DeleteEntity implements Backend: in every group, partition 0's last:
// a cluster forgets the placement (and spread) of a queue or topic when
// the group it is placed in deletes it, so a delete that stops half done
// leaves the name placed, for the retry to find the rest.
func (s *spreadBackend) DeleteEntity(ctx context.Context, path string) error {
	gs := s.sp.Distinct()
	slices.Reverse(gs)
	_, _, err := s.eachGroupOf(gs, CodeNotFound, func(_ uint64, be Backend) error { return be.DeleteEntity(ctx, path) })
	return err
}

// GetEntity implements Backend.
func (s *spreadBackend) GetEntity(path string) (*Entity, error) {
	var d *Entity
	err := s.homeFirst(func(be Backend) (err error) {
		d, err = be.GetEntity(path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return public(d), nil
}

// ListEntities implements Backend (a spread topic's subscriptions).
func (s *spreadBackend) ListEntities(kind EntityKind, topic string) ([]*Entity, error) {
	var out []*Entity
	err := s.homeFirst(func(be Backend) (err error) {
		out, err = be.ListEntities(kind, topic)
		return err
	})
	for _, d := range out {
		public(d)
	}
	return out, err
}

// AddRule implements Backend: in every group.
func (s *spreadBackend) AddRule(ctx context.Context, path string, r Rule) error {
	_, _, err := s.eachGroup(CodeEntityExists, func(_ uint64, be Backend) error { return be.AddRule(ctx, path, r) })
	return err
}

// RemoveRule implements Backend: in every group.
func (s *spreadBackend) RemoveRule(ctx context.Context, path, name string) error {
	_, _, err := s.eachGroup(CodeRuleNotFound, func(_ uint64, be Backend) error { return be.RemoveRule(ctx, path, name) })
	return err
}

// ListRules implements Backend.
func (s *spreadBackend) ListRules(path string) ([]Rule, error) {
	var out []Rule
	err := s.homeFirst(func(be Backend) (err error) {
		out, err = be.ListRules(path)
		return err
	})
	return out, err
}

// Counts implements Backend: the groups' added up (each holds every
// subscription: those are counted once).
func (s *spreadBackend) Counts(path string) (Counts, error) {
	var sum Counts
	_, _, err := s.eachGroup(noSoft, func(_ uint64, be Backend) error {
		c, err := be.Counts(path)
		if err != nil {
			return err
		}
		sum.addMessages(c)
		sum.Subscriptions = max(sum.Subscriptions, c.Subscriptions)
		return nil
	})
	return sum, err
}

// EntityStats implements Backend: the groups' counters added up; the
// latency histograms are partition 0's group's.
func (s *spreadBackend) EntityStats(path string) (EntityStats, error) {
	var sum EntityStats
	first := true
	_, _, err := s.eachGroup(noSoft, func(_ uint64, be Backend) error {
		st, err := be.EntityStats(path)
		if err != nil {
			return err
		}
		if first {
			sum, first = st, false
			return nil
		}
		sum.addCounters(st)
		return nil
	})
	return sum, err
}

// sendJoin gathers the parts of a SendAsync split over groups.
type sendJoin struct {
	mu   sync.Mutex
	left int // parts not done
	seqs []int64
	err  error
	done func(seqs []int64, err error)
}

func joinSends(n, parts int, done func([]int64, error)) *sendJoin {
	return &sendJoin{left: parts, seqs: make([]int64, n), done: done}
}

// part is the completion of the part holding the messages at.
func (j *sendJoin) part(at []int) func([]int64, error) {
	return func(seqs []int64, err error) {
		j.mu.Lock()
		if err != nil && j.err == nil {
			j.err = err
		}
		for k, i := range at {
			if k < len(seqs) {
				j.seqs[i] = seqs[k]
			}
		}
		j.left--
		last := j.left == 0
		j.mu.Unlock()
		if !last {
			return
		}
		if j.err != nil {
			j.done(nil, j.err)
			return
		}
		j.done(j.seqs, nil)
	}
}

// mergeSnapshots calls fn with the snapshots of every entity of the
// backends bs, in path order; an entity several of them hold (a spread
// one) is reported once, with its counts and counters added up, the ID
// and latency histograms of the copy with the lowest ID.
func mergeSnapshots(bs []Backend, fn func(*EntitySnapshot)) {
	byPath := map[string]*EntitySnapshot{}
	for _, be := range bs {
		be.EachEntity(func(s *EntitySnapshot) {
			key := entityKey(s.Path)
			m := byPath[key]
			if m == nil {
				c := *s
				c.Stats.SendLatency = s.Stats.SendLatency.clone()
				c.Stats.EndToEnd = s.Stats.EndToEnd.clone()
				byPath[key] = &c
				return
			}
			if s.ID < m.ID {
				m.ID = s.ID
				m.Stats.SendLatency = s.Stats.SendLatency.clone()
				m.Stats.EndToEnd = s.Stats.EndToEnd.clone()
			}
			m.Counts.addMessages(s.Counts)
			m.Stats.addCounters(s.Stats)
		})
	}
	keys := make([]string, 0, len(byPath))
	for k := range byPath {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fn(byPath[k])
	}
}

// clone returns a copy of h that shares no slice with it.
func (h Histogram) clone() Histogram {
	return Histogram{Bounds: slices.Clone(h.Bounds), Counts: slices.Clone(h.Counts), Sum: h.Sum}
}
