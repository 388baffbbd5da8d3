package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Errors a Session ends with (all wrap storage.ErrUnavailable).
var (
	errNotLeader    = fmt.Errorf("%w: raftstore: no longer the leader", storage.ErrUnavailable)
	errLeaseLapsed  = fmt.Errorf("%w: raftstore: the leader lease lapsed (no quorum heard from)", storage.ErrUnavailable)
	errStalled      = fmt.Errorf("%w: raftstore: this node's disk refuses writes", storage.ErrUnavailable)
	errTimedOut     = fmt.Errorf("%w: raftstore: a write was not committed in time; its outcome is unknown", storage.ErrUnavailable)
	errTransferring = fmt.Errorf("%w: raftstore: this node is handing its leadership over", storage.ErrUnavailable)
)

// proposalTimeout bounds how long Apply waits for its batch to commit. It
// is a safety net: a lapsed lease or a change of leader ends the Session
// (and so fails the wait) much sooner.
const proposalTimeout = 30 * time.Second

// Session is the [storage.Store] of one stretch of leadership: what the
// leader's broker runs on. It ends when the node may no longer be the only
// leader (see [Session.Done]); from then on every call fails with an error
// wrapping storage.ErrUnavailable (storage.ErrClosed once it or the node
// was closed), and so do the Apply calls in flight: those whose batch was
// never proposed were not applied, the others may still be (as for a disk
// that fails under a commit), so nothing may build on them: the broker is
// rebuilt from the store by the next Session.
type Session struct {
	n       *Node
	term    uint64
	started time.Time // wall clock: Status.ServingSince
	done    chan struct{}
	endErr  atomic.Pointer[error] // set once, when the Session ends
	closed  atomic.Bool           // Close was called
}

var (
	_ storage.Store          = (*Session)(nil)
	_ storage.HealthReporter = (*Session)(nil)
)

// Session waits until this node may serve (it leads, holds the lease, and
// has applied everything committed before) and returns a new Session. Only
// one Session is live at a time: it waits for the previous one to end.
func (n *Node) Session(ctx context.Context) (*Session, error) {
	for {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return nil, storage.ErrClosed
		}
		if n.sess == nil && n.canServe && n.leaseValid() {
			s := &Session{n: n, term: n.term.Load(), started: time.Now(), done: make(chan struct{})}
			n.sess = s
			n.broadcastLocked()
			n.mu.Unlock()
			return s, nil
		}
		ch := n.changed
		n.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Done is closed when the Session ends.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the Session ended, nil while it is live.
func (s *Session) Err() error {
	if p := s.endErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Term is the Raft term the Session belongs to.
func (s *Session) Term() uint64 { return s.term }

// Valid reports whether the Session is live and its lease holds now. The
// leader checks it before each write to a client: once it is false, no
// other byte may leave this node for a client (another node may be
// elected at any moment).
func (s *Session) Valid() bool { return s.endErr.Load() == nil && s.n.leaseValid() }

// Apply implements [storage.Store]: it returns once the batch is committed
// by a quorum and applied locally. Sync makes no difference: every batch
// is on a majority of disks when Apply returns nil.
func (s *Session) Apply(b *storage.Batch) error {
	if err := s.Err(); err != nil {
		return err
	}
	if b == nil || len(b.Ops) == 0 {
		return nil
	}
	enc, err := encodeBatch(make([]byte, 0, encodedSize(b)), b)
	if err != nil {
		return err
	}
	if len(enc) > MaxBatchBytes {
		return fmt.Errorf("raftstore: a batch of %d bytes is more than a Raft entry may carry (%d); nothing was written", len(enc), MaxBatchBytes)
	}
	p := &proposal{enc: enc, done: make(chan error, 1)}
	if err := s.n.enqueue(s, p); err != nil {
		return err
	}
	t := time.NewTimer(proposalTimeout)
	defer t.Stop()
	select {
	case err := <-p.done:
		return err
	case <-t.C:
		s.n.endSession(s, errTimedOut)
		return <-p.done
	}
}

// Get implements [storage.Store].
func (s *Session) Get(key []byte) ([]byte, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	return s.n.state.get(key)
}

// Scan implements [storage.Store].
func (s *Session) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	if err := s.Err(); err != nil {
		return err
	}
	return s.n.state.scan(prefix, start, fn)
}

// Health implements [storage.HealthReporter]: the state database's health
// while the Session is live, else why it ended.
func (s *Session) Health() error {
	if err := s.Err(); err != nil {
		if errors.Is(err, storage.ErrClosed) {
			return fmt.Errorf("%w: %w", storage.ErrUnavailable, storage.ErrClosed)
		}
		return err
	}
	return s.n.state.health()
}

// Close ends the Session (the node goes on, and may start another). A
// second Close returns storage.ErrClosed.
func (s *Session) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return storage.ErrClosed
	}
	s.n.endSession(s, storage.ErrClosed)
	return nil
}

// endSession ends s, if it is still live.
func (n *Node) endSession(s *Session, why error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.endSessionLocked(s, why)
}

// endSessionLocked ends s: batches still queued fail as not applied,
// those proposed fail with why (their outcome is unknown), and the loop
// is told to fence the entries they may have left in the log.
func (n *Node) endSessionLocked(s *Session, why error) {
	if !s.endErr.CompareAndSwap(nil, &why) {
		return
	}
	if n.sess == s {
		n.sess = nil
	}
	n.failQueueLocked(why)
	for seq, p := range n.waiting {
		p.done <- why
		delete(n.waiting, seq)
	}
	n.fenceAgain = true
	n.canServe = false
	n.draining = false
	close(s.done)
	if !errors.Is(why, storage.ErrClosed) {
		n.log.Warn("leadership session ended", zapErr(why))
	}
	n.broadcastLocked()
}

// watchLease ends the Session as soon as the lease lapses, whatever the
// loop is doing (a loop stuck on its disk must not keep a Session alive),
// or once the node stalls on its disk. It sleeps until the lease's end
// while a Session is live, and otherwise until Changed (a Session began,
// the node stalled): a node that leads nothing, or is idle, takes no
// wake-ups from it. Renewals only move the end later, so a wake-up at the
// old end finds the new one and sleeps again; the lease is taken back
// (leaseUntil 0) only together with ending the Session.
func (n *Node) watchLease() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		n.mu.Lock()
		left := time.Duration(-1)
		if n.sess != nil && !n.leaseValid() {
			n.log.Warn("lease lapsed", zap.Duration("since", time.Duration(n.mono()-n.leaseUntil.Load())))
			n.endSessionLocked(n.sess, errLeaseLapsed)
		}
		if n.sess != nil && n.stalled.Load() {
			n.endSessionLocked(n.sess, errStalled)
		}
		if n.sess != nil {
			left = time.Duration(n.leaseUntil.Load() - n.mono())
		}
		changed := n.changed
		n.mu.Unlock()
		if left >= 0 {
			t.Reset(left + time.Millisecond) // past the end, not on it
		} else {
			t.Stop()
		}
		select {
		case <-n.stopc:
			return
		case <-t.C:
		case <-changed:
		}
	}
}
