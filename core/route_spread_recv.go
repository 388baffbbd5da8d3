package core

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Receiving from a spread entity: from whichever group has messages, as
// receiveAny does from whichever partition has, taking from a group only
// what the receive hands out.
//
// A receive first takes what the groups have now, one after the other
// from a different one each time, each asked with a done context (which
// takes only what is there), until its batch is full (one group only when
// the batch is bounded in bytes, as a front's is). When none has anything
// it waits on every group at once, in peek-lock mode whatever the
// receive's, with its own context. For a Max of at least the number of
// groups, each group is asked for a share of Max (and of MaxBytes): the
// first answer with messages cancels the others' waits, and whatever they
// handed out before the cancellation reached them is kept too, since the
// shares add up to Max; a group that filled its share may hold more and
// is asked again, without waiting, for what is left of Max. For a smaller
// Max each group is asked for all of it, and of the answers that come
// together the first Max messages are kept and the rest released (given
// back without counting a delivery): the only messages a receive takes
// and does not hand out. (Every group asked for the whole Max, with the
// losers' messages released, was how every wait went before; under a
// steady load the waits are rare next to the first pass's takes, so it
// cost little: [SpreadReceiveStats] count both.)
//
// A receive-and-delete receive then completes what it got: a message
// whose completion fails is not handed out, and is delivered again once
// its lock ends, rather than lost. A group that refuses while the receive
// waits (it is changing leaders, or out of reach) ends the wait; the
// receive returns what the other groups handed out, or the retryable
// refusal when they handed out nothing, so that the front detaches the
// link and the client comes back. A refusal of the first pass is not
// final: its done context cannot even open a connection to a node this
// one has not called yet, so the wait asks again.

// doneCtx is a context that is already done: a receive given it takes
// what is there and does not wait.
func doneCtx(ctx context.Context) context.Context {
	c, cancel := context.WithCancel(ctx)
	cancel()
	return c
}

// Receive implements Backend.
func (s *spreadBackend) Receive(ctx context.Context, path string, opts ReceiveOptions) ([]*Message, error) {
	if opts.Session != nil {
		be, err := s.be(s.groupOfKey(opts.Session.SessionID))
		if err != nil {
			return nil, err
		}
		return be.Receive(ctx, path, opts)
	}
	if opts.Max < 1 {
		opts.Max = 1
	}
	s.b.spread.receives.Add(1)
	gs := s.sp.Distinct()
	start := rand.IntN(len(gs))
	gs = append(gs[start:], gs[:start]...)
	out, err := s.receive(ctx, path, opts, gs)
	s.b.spread.delivered.Add(int64(len(out)))
	return out, err
}

// receive is Receive over the groups gs, in the order to ask them.
func (s *spreadBackend) receive(ctx context.Context, path string, opts ReceiveOptions, gs []uint64) ([]*Message, error) {
	now := doneCtx(ctx)
	var out []*Message
	var refused error
	for _, g := range gs {
		be, err := s.be(g)
		var msgs []*Message
		if err == nil {
			o := opts
			o.Max = opts.Max - len(out)
			s.b.spread.groupReceives.Add(1)
			msgs, err = be.Receive(now, path, o)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			if refused == nil {
				refused = err
			}
			continue
		}
		out = append(out, msgs...)
		if len(out) >= opts.Max || opts.MaxBytes > 0 && len(out) > 0 {
			break
		}
	}
	switch {
	case len(out) > 0:
		return out, nil
	case ctx.Err() != nil && refused != nil:
		return nil, refused
	case ctx.Err() != nil:
		return nil, ctxEnd(ctx)
	}
	// A refusal of the first pass is asked again with the receive's own
	// context: a done one cannot even connect to a node not called yet.
	asks := make([]groupAsk, len(gs))
	for i, g := range gs {
		asks[i] = groupAsk{g: g, max: opts.Max, maxBytes: opts.MaxBytes}
		if opts.Max >= len(gs) {
			asks[i].max = opts.Max / len(gs)
			if i < opts.Max%len(gs) {
				asks[i].max++
			}
			if opts.MaxBytes > 0 {
				asks[i].maxBytes = max(1, opts.MaxBytes/len(gs))
			}
		}
	}
	took, err := s.receiveWait(ctx, path, opts.Max, asks)
	if err != nil || len(took) == 0 {
		return nil, err
	}
	s.topUp(ctx, path, opts, took)
	return s.handOut(path, opts.Mode, took), nil
}

// topUp adds to took, without waiting, from the groups that filled their
// share of a wait: they may hold more. It stops at opts.Max (and
// opts.MaxBytes).
func (s *spreadBackend) topUp(ctx context.Context, path string, opts ReceiveOptions, took []groupTook) {
	n, size := 0, 0
	for _, t := range took {
		n += len(t.msgs)
		for _, m := range t.msgs {
			size += m.Size()
		}
	}
	for i := 0; i < len(took) && n < opts.Max && (opts.MaxBytes == 0 || size < opts.MaxBytes); i++ {
		t := &took[i]
		if len(t.msgs) < t.ask.max {
			continue
		}
		o := ReceiveOptions{Mode: PeekLock, Max: opts.Max - n}
		if opts.MaxBytes > 0 {
			o.MaxBytes = opts.MaxBytes - size
		}
		s.b.spread.groupReceives.Add(1)
		more, err := t.be.Receive(doneCtx(ctx), path, o)
		if err == nil || errors.Is(err, context.Canceled) {
			t.msgs = append(t.msgs, more...)
			n += len(more)
			for _, m := range more {
				size += m.Size()
			}
		}
	}
}

// ctxEnd is what a receive whose ctx ended returns: nil for a deadline
// (the caller's own timeout), the cancellation otherwise.
func ctxEnd(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	return ctx.Err()
}

// groupAnswer is one group's answer to a wait on all of them.
type groupAnswer[T any] struct {
	be  Backend
	got T
	err error
}

// groupAsk is what a receive asks of one group: g, for up to max messages
// of up to maxBytes.
type groupAsk struct {
	g             uint64
	max, maxBytes int
}

// groupTook is what one group handed out to a receive, locked.
type groupTook struct {
	ask  groupAsk
	be   Backend
	msgs []*Message
}

// receiveWait asks every group of asks at once, in peek-lock mode, and
// waits until one hands out messages or refuses, then cancels the others
// and gathers their answers: up to max messages are kept, in the order
// the answers came, the rest released. With nothing kept it returns a
// group's refusal, or what the end of ctx means.
func (s *spreadBackend) receiveWait(ctx context.Context, path string, max int, asks []groupAsk) ([]groupTook, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		groupTook
		err error
	}
	ch := make(chan answer, len(asks))
	for _, a := range asks {
		go func() {
			be, err := s.be(a.g)
			var msgs []*Message
			if err == nil {
				s.b.spread.groupReceives.Add(1)
				msgs, err = be.Receive(wctx, path, ReceiveOptions{Mode: PeekLock, Max: a.max, MaxBytes: a.maxBytes})
			}
			ch <- answer{groupTook{a, be, msgs}, err}
		}()
	}
	var took []groupTook
	var refused error
	n := 0
	for range asks {
		a := <-ch
		switch {
		case len(a.msgs) > 0:
			cancel()
			keep := min(len(a.msgs), max-n)
			if keep < len(a.msgs) {
				s.release(a.be, path, a.msgs[keep:])
				if max < len(asks) {
					s.b.spread.releasedSmallCredit.Add(int64(len(a.msgs) - keep))
				}
			}
			if keep > 0 {
				took = append(took, groupTook{a.ask, a.be, a.msgs[:keep]})
				n += keep
			}
		case a.err != nil && wctx.Err() == nil:
			refused = a.err
			cancel()
		}
	}
	switch {
	case len(took) > 0:
		return took, nil
	case refused != nil:
		return nil, refused
	}
	return nil, ctxEnd(ctx)
}

// handOut returns the messages of took for a receive in mode: as they
// are for peek-lock, completed for receive-and-delete (completeTaken).
func (s *spreadBackend) handOut(path string, mode ReceiveMode, took []groupTook) []*Message {
	var out []*Message
	for _, t := range took {
		if mode == ReceiveAndDelete {
			out = append(out, completeTaken(t.be, path, t.msgs)...)
		} else {
			out = append(out, t.msgs...)
		}
	}
	return out
}

// release gives back messages be handed out under peek-lock.
func (s *spreadBackend) release(be Backend, path string, msgs []*Message) {
	s.b.spread.released.Add(int64(len(msgs)))
	for _, m := range msgs {
		_ = be.Settle(context.Background(), path, m.LockToken, Outcome{Kind: Release})
	}
}

// completeTaken completes messages be handed out under peek-lock for a
// receive-and-delete receive, returning those completed, unlocked.
func completeTaken(be Backend, path string, msgs []*Message) []*Message {
	toks := make([]LockToken, len(msgs))
	for i, m := range msgs {
		toks[i] = m.LockToken
	}
	errs := be.CompleteMany(path, toks, true)
	out := msgs[:0]
	for i, m := range msgs {
		if i < len(errs) && errs[i] != nil {
			continue // still locked: delivered again when the lock ends
		}
		m.LockToken, m.LockedUntil = LockToken{}, time.Time{}
		out = append(out, m)
	}
	return out
}

// AcceptSession implements Backend: a named session in its partition's
// group; the next available one from whichever group has one, as
// Receive waits (an extra session accepted meanwhile is closed).
func (s *spreadBackend) AcceptSession(ctx context.Context, path, id string) (*SessionLock, error) {
	if id != "" {
		be, err := s.be(s.groupOfKey(id))
		if err != nil {
			return nil, err
		}
		return be.AcceptSession(ctx, path, id)
	}
	gs := s.sp.Distinct()
	start := rand.IntN(len(gs))
	now := doneCtx(ctx)
	var timedOut, refused error
	for i := range gs {
		be, err := s.be(gs[(start+i)%len(gs)])
		var sl *SessionLock
		if err == nil {
			sl, err = be.AcceptSession(now, path, "")
		}
		switch {
		case err == nil:
			return sl, nil
		case CodeOf(err) == CodeTimeout || errors.Is(err, context.Canceled):
			if timedOut == nil || CodeOf(err) == CodeTimeout {
				timedOut = err
			}
		case refused == nil:
			refused = err
		}
	}
	if ctx.Err() != nil {
		if refused != nil {
			return nil, refused
		}
		return nil, timedOut
	}
	return s.acceptWait(ctx, path, gs) // a first pass's refusal is asked again, as Receive does
}

// acceptWait waits on every group of gs for a session to accept.
func (s *spreadBackend) acceptWait(ctx context.Context, path string, gs []uint64) (*SessionLock, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan groupAnswer[*SessionLock], len(gs))
	for _, g := range gs {
		go func() {
			be, err := s.be(g)
			var sl *SessionLock
			if err == nil {
				sl, err = be.AcceptSession(wctx, path, "")
			}
			ch <- groupAnswer[*SessionLock]{be, sl, err}
		}()
	}
	var win *groupAnswer[*SessionLock]
	var refused, timedOut error
	for range gs {
		a := <-ch
		switch {
		case a.err == nil && win == nil && refused == nil:
			win = &a
			cancel()
		case a.err == nil:
			_ = a.be.CloseSession(path, a.got)
		case CodeOf(a.err) == CodeTimeout || errors.Is(a.err, context.Canceled):
			if timedOut == nil || CodeOf(a.err) == CodeTimeout {
				timedOut = a.err
			}
		case wctx.Err() == nil:
			refused = a.err
			cancel()
		}
	}
	switch {
	case refused != nil:
		if win != nil {
			_ = win.be.CloseSession(path, win.got)
		}
		return nil, refused
	case win != nil:
		return win.got, nil
	case timedOut != nil && CodeOf(timedOut) == CodeTimeout:
		return nil, timedOut
	}
	return nil, errf(CodeTimeout, "No session available to accept on '%s' within the timeout.", path)
}

// sessionBackend returns the backend of the group of session id.
func (s *spreadBackend) sessionBackend(id string) (Backend, error) { return s.be(s.groupOfKey(id)) }

// RenewSessionLock implements Backend.
func (s *spreadBackend) RenewSessionLock(ctx context.Context, path string, sl *SessionLock) (time.Time, error) {
	be, err := s.sessionBackend(sl.SessionID)
	if err != nil {
		return time.Time{}, err
	}
	return be.RenewSessionLock(ctx, path, sl)
}

// CloseSession implements Backend.
func (s *spreadBackend) CloseSession(path string, sl *SessionLock) error {
	be, err := s.sessionBackend(sl.SessionID)
	if err != nil {
		return err
	}
	return be.CloseSession(path, sl)
}

// GetSessionState implements Backend.
func (s *spreadBackend) GetSessionState(ctx context.Context, path string, sl *SessionLock) ([]byte, error) {
	be, err := s.sessionBackend(sl.SessionID)
	if err != nil {
		return nil, err
	}
	return be.GetSessionState(ctx, path, sl)
}

// SetSessionState implements Backend.
func (s *spreadBackend) SetSessionState(ctx context.Context, path string, sl *SessionLock, state []byte) error {
	be, err := s.sessionBackend(sl.SessionID)
	if err != nil {
		return err
	}
	return be.SetSessionState(ctx, path, sl, state)
}

// ListSessions implements Backend: every group's, merged.
func (s *spreadBackend) ListSessions(ctx context.Context, path string, since time.Time) ([]string, error) {
	var ids []string
	for _, g := range s.sp.Distinct() {
		be, err := s.be(g)
		if err != nil {
			return nil, err
		}
		got, err := be.ListSessions(ctx, path, since)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	sort.Strings(ids)
	return ids, nil
}

// Sessions implements Backend: every group's first max after after,
// merged by id; the total adds up.
func (s *spreadBackend) Sessions(path, after string, max int) ([]SessionInfo, int, error) {
	var out []SessionInfo
	total := 0
	for _, g := range s.sp.Distinct() {
		be, err := s.be(g)
		if err != nil {
			return nil, 0, err
		}
		got, n, err := be.Sessions(path, after, max)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, got...)
		total += n
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) > max {
		out = out[:max]
	}
	return out, total, nil
}

// ReceiveDeferred implements Backend: each group receives the numbers of
// its partitions, in peek-lock mode when more than one group is asked
// (completed once all answered, for receive-and-delete), so that a
// number one group does not know loses nothing another handed out.
func (s *spreadBackend) ReceiveDeferred(ctx context.Context, path string, mode ReceiveMode, seqs []int64) ([]*Message, error) {
	gs, at := splitBy(len(seqs), func(i int) uint64 { return s.groupOfSeq(seqs[i]) })
	if len(gs) == 1 {
		be, err := s.be(gs[0])
		if err != nil {
			return nil, err
		}
		return be.ReceiveDeferred(ctx, path, mode, seqs)
	}
	type took struct {
		be   Backend
		msgs []*Message
	}
	var got []took
	undo := func() {
		for _, t := range got {
			s.release(t.be, path, t.msgs)
		}
	}
	for j, g := range gs {
		be, err := s.be(g)
		var msgs []*Message
		if err == nil {
			msgs, err = be.ReceiveDeferred(ctx, path, PeekLock, pick(seqs, at[j]))
		}
		if err != nil {
			undo()
			return nil, err
		}
		got = append(got, took{be, msgs})
	}
	bySeq := map[int64]*Message{}
	for _, t := range got {
		msgs := t.msgs
		if mode == ReceiveAndDelete {
			msgs = completeTaken(t.be, path, msgs)
		}
		for _, m := range msgs {
			bySeq[m.SequenceNumber] = m
		}
	}
	out := make([]*Message, 0, len(bySeq))
	for _, seq := range seqs {
		if m := bySeq[seq]; m != nil {
			out = append(out, m)
			delete(bySeq, seq)
		}
	}
	return out, nil
}

// Peek implements Backend: a session's in its group; otherwise every
// group's first max from opts.From, merged in sequence-number order (each
// group's are its smallest, so the merge's first max are the entity's).
func (s *spreadBackend) Peek(ctx context.Context, path string, opts PeekOptions) ([]*Message, error) {
	if opts.SessionID != "" {
		be, err := s.be(s.groupOfKey(opts.SessionID))
		if err != nil {
			return nil, err
		}
		return be.Peek(ctx, path, opts)
	}
	if opts.Max < 1 {
		opts.Max = 1
	}
	o := opts
	o.Reserve = nil
	var all []*Message
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed error
	for _, g := range s.sp.Distinct() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be, err := s.be(g)
			var msgs []*Message
			if err == nil {
				msgs, err = be.Peek(ctx, path, o)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && failed == nil {
				failed = err
			}
			all = append(all, msgs...)
		}()
	}
	wg.Wait()
	if failed != nil {
		return nil, failed
	}
	sort.Slice(all, func(i, j int) bool { return all[i].SequenceNumber < all[j].SequenceNumber })
	out := all[:0]
	size := 0
	for _, m := range all {
		if len(out) == opts.Max {
			break
		}
		size += m.Size()
		if opts.MaxBytes > 0 && len(out) > 0 && size > opts.MaxBytes {
			break
		}
		if opts.Reserve != nil && !opts.Reserve(m.Size()) {
			break
		}
		out = append(out, m)
	}
	return out, nil
}
