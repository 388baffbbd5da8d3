package pebblestore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/omnibusmq/omnibus/storage"
)

// Retry pacing of a write the disk refused: the first retry comes soon (a
// transient error), later ones once a second, so a full disk costs one
// failed system call per second per blocked write.
const (
	firstRetryDelay = 10 * time.Millisecond
	maxRetryDelay   = time.Second
)

// faults is what the store knows of its disk's health. The file system
// wrapper (faultFS) reports to it; Apply, Health and Close read it.
//
// Pebble cannot survive a failed write of its write-ahead log, MANIFEST or
// blob files: it panics, dereferences nil, calls Logger.Fatalf, or wedges
// its commit pipeline. So no such failure ever reaches Pebble. A write that fails is retried where it
// stands, blocking the goroutine that made it, until it succeeds (space
// came back) or the store is abandoned; meanwhile the store refuses new
// writes, so nothing but the few commits already in flight waits on it.
// A failed fsync of a file Pebble cannot do without is not retried (after
// a failed fsync the kernel may have dropped the data it could not write):
// it parks, and the store refuses writes until it is restarted.
//
// The commits in flight when the disk fails would wait with the write that
// failed, for good after a failed fsync, until an administrator acts after
// a file system turned read-only. So their callers are released (see
// release and Store.commitWatched) and answered that whether their batch
// reached the disk is unknown. Only a full disk keeps them waiting: space
// comes back by itself, and with it the true answer.
type faults struct {
	// calm is set while nothing below is wrong (no blocked write, no
	// fatal state, no failing flush): the check every Apply makes.
	calm atomic.Bool
	// stalled is set while Pebble stalls writes (too many memtables wait
	// for a flush): with a blocked flush, a commit would wait with it.
	stalled atomic.Bool

	mu sync.Mutex // guards the fields below
	// blocked holds the writes being retried now, by id.
	blocked map[uint64]*blockedOp
	nextID  uint64
	// fatal, once set, refuses every write until restart: an fsync that
	// failed, or Pebble reporting a state it cannot continue from.
	fatal error
	// flushErr is the last error of a write Pebble can survive (an
	// sstable or blob file it will write again), until such a write
	// succeeds. While set, writes that grow the store are refused, and
	// new files of that kind are created only after a pause.
	flushErr   error
	flushDelay time.Duration
	// closing makes retried writes Pebble can survive give up, so that
	// closing does not wait for the disk.
	closing bool
	// abandoned: the store gave up on Pebble (closing while a write it
	// cannot survive was blocked). Every blocked write parks for good.
	abandoned bool
	// wake is closed and replaced whenever closing or abandoned changes,
	// to wake retry loops from their pause.
	wake chan struct{}
	// events is closed and replaced after every change of state, for
	// those who wait on the state with a select (Open, Close).
	events chan struct{}
	// release is closed while the commits in flight cannot be expected to
	// finish: fatal is set, the store abandoned Pebble, or a write commits
	// wait on is failing for another reason than a full disk. It is
	// replaced by an open channel when that clears (never after fatal or
	// abandon). Its pointer is read without mu.
	release atomic.Pointer[chan struct{}]
	// changed is called, without mu, after the state changed.
	changed func()
}

// opClass says what a write's failure would do to Pebble.
type opClass struct {
	// holdsCommits: commits wait on the write (the log, the MANIFEST), so
	// while it is blocked every write is refused.
	holdsCommits bool
	// mustNotFail: Pebble cannot survive the write's failure, so it is
	// never given up, not even when the store closes (which then leaves
	// Pebble as it is instead).
	mustNotFail bool
	// failsAtOnce: the operation's failure is returned as it is, never
	// retried (a checkpoint's file: roleCopy).
	failsAtOnce bool
}

// blockedOp is one write being retried.
type blockedOp struct {
	what   string // "writing 000012.log"
	path   string
	class  opClass
	err    error
	since  time.Time
	parked bool // a failed fsync: never retried
}

func newFaults() *faults {
	f := &faults{blocked: map[uint64]*blockedOp{}, wake: make(chan struct{}), events: make(chan struct{})}
	f.calm.Store(true)
	open := make(chan struct{})
	f.release.Store(&open)
	return f
}

// notify updates calm, wakes those waiting on events and calls the change
// hook.
func (f *faults) notify() {
	f.mu.Lock()
	f.calm.Store(f.fatal == nil && len(f.blocked) == 0 && f.flushErr == nil)
	f.updateReleaseLocked()
	close(f.events)
	f.events = make(chan struct{})
	f.mu.Unlock()
	if f.changed != nil {
		f.changed()
	}
}

// eventsC returns a channel closed at the next change of state.
func (f *faults) eventsC() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events
}

// anyBlocked reports whether a write is being retried or parked.
func (f *faults) anyBlocked() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.blocked) > 0
}

// parkIfAbandoned parks the caller for good if the store abandoned Pebble:
// nothing of an abandoned database may touch the disk again.
func (f *faults) parkIfAbandoned() {
	f.mu.Lock()
	abandoned := f.abandoned
	f.mu.Unlock()
	if abandoned {
		parkForever()
	}
}

// permanent wraps an error that retry must hand back at once rather than
// retry: a mistake in the call, not a fault of the disk.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

// unwrapPermanent strips the permanent marker off an error from retry.
func unwrapPermanent(err error) error {
	if p, ok := err.(permanent); ok {
		return p.err
	}
	return err
}

// retry runs op until it succeeds and returns nil, registering the fault
// while it fails. An error op marks permanent is returned at once (still
// marked: see unwrapPermanent). A write Pebble can survive gives up
// (returning op's last error) once the store is closing; one it cannot
// survive parks for good once the store is abandoned.
func (f *faults) retry(what, path string, class opClass, op func() error) error {
	f.parkIfAbandoned()
	err := op()
	if _, ok := err.(permanent); err == nil || ok || class.failsAtOnce {
		return err
	}
	f.mu.Lock()
	id := f.nextID
	f.nextID++
	b := &blockedOp{what: what, path: path, class: class, err: err, since: time.Now()}
	f.blocked[id] = b
	f.mu.Unlock()
	f.notify()
	defer func() {
		f.mu.Lock()
		delete(f.blocked, id)
		f.mu.Unlock()
		f.notify()
	}()
	delay := firstRetryDelay
	for {
		f.mu.Lock()
		giveUp, abandoned, wake := f.closing && !class.mustNotFail, f.abandoned, f.wake
		f.mu.Unlock()
		if giveUp {
			return err
		}
		if abandoned {
			parkForever()
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-wake:
			t.Stop()
			continue
		}
		delay = min(2*delay, maxRetryDelay)
		err = op()
		if _, ok := err.(permanent); err == nil || ok {
			return err
		}
		f.mu.Lock()
		b.err = err
		f.mu.Unlock()
	}
}

// park records a failed fsync of a file Pebble cannot do without and never
// returns: the caller (Pebble's log writer, a MANIFEST update, a flush)
// waits until the process ends, and the store refuses writes meanwhile.
func (f *faults) park(what, path string, class opClass, err error) {
	f.mu.Lock()
	if f.fatal == nil {
		f.fatal = fmt.Errorf("%s failed: %w; writes are refused until omnibus restarts", what, err)
	}
	f.blocked[f.nextID] = &blockedOp{what: what, path: path, class: class, err: err, since: time.Now(), parked: true}
	f.nextID++
	f.mu.Unlock()
	f.notify()
	parkForever()
}

// parkForever blocks the calling goroutine until the process ends.
func parkForever() { select {} }

// setFatal records a state Pebble reported it cannot continue from.
func (f *faults) setFatal(err error) {
	f.mu.Lock()
	if f.fatal == nil {
		f.fatal = err
	}
	f.mu.Unlock()
	f.notify()
}

// releaseC returns the channel closed while the callers of commits in
// flight are released (see faults.release).
func (f *faults) releaseC() <-chan struct{} { return *f.release.Load() }

// updateReleaseLocked closes or replaces release for the present state.
func (f *faults) updateReleaseLocked() {
	cur := *f.release.Load()
	closed := false
	select {
	case <-cur:
		closed = true
	default:
	}
	switch failing := f.failingLocked() != nil; {
	case failing && !closed:
		close(cur)
	case !failing && closed:
		open := make(chan struct{})
		f.release.Store(&open)
	}
}

// failingLocked returns why the commits in flight are not expected to
// finish (see release), or nil.
func (f *faults) failingLocked() error {
	if f.fatal != nil {
		return f.fatal
	}
	b := f.oldestLocked(func(b *blockedOp) bool { return b.class.holdsCommits && !isNoSpace(b.err) })
	switch {
	case b != nil && f.abandoned:
		return fmt.Errorf("the store gave up on its disk: %s: %w", b.what, b.err)
	case b != nil:
		return fmt.Errorf("%s: %w", b.what, b.err)
	case f.abandoned:
		return errors.New("the store gave up on its disk")
	}
	return nil
}

// doomedError is what a commit whose caller was released returns: the
// disk failed under it, so whether it reached the disk is unknown.
func (f *faults) doomedError() error {
	f.mu.Lock()
	why := f.failingLocked()
	if why == nil { // the disk came back meanwhile
		why = errors.New("the disk failed for a while")
	}
	f.mu.Unlock()
	return fmt.Errorf("%w: %w: pebblestore: the disk failed while the batch was being committed, "+
		"so whether it is stored is unknown: %v", storage.ErrUnavailable, storage.ErrOutcomeUnknown, why)
}

// flushFailed records the failure of a write Pebble retries by itself.
func (f *faults) flushFailed(err error) {
	f.mu.Lock()
	f.flushErr = err
	f.mu.Unlock()
	f.notify()
}

// flushSucceeded clears a failure recorded by flushFailed.
func (f *faults) flushSucceeded() {
	f.mu.Lock()
	cleared := f.flushErr != nil
	f.flushErr, f.flushDelay = nil, 0
	f.mu.Unlock()
	if cleared {
		f.notify()
	}
}

// pauseBeforeCreate paces Pebble's retries of a failing flush or
// compaction: each new sstable or blob file waits a little longer while
// the last such write failed, instead of Pebble retrying at once in a loop.
func (f *faults) pauseBeforeCreate() {
	f.parkIfAbandoned()
	f.mu.Lock()
	if f.flushErr == nil || f.closing {
		f.mu.Unlock()
		return
	}
	f.flushDelay = min(max(2*f.flushDelay, firstRetryDelay), maxRetryDelay)
	d, wake := f.flushDelay, f.wake
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	}
}

// beginClose makes retried writes Pebble can survive give up.
func (f *faults) beginClose() {
	f.mu.Lock()
	f.closing = true
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

// abandon parks every blocked write, and every later write, for good.
func (f *faults) abandon() {
	f.mu.Lock()
	f.abandoned = true
	close(f.wake)
	f.wake = make(chan struct{})
	f.updateReleaseLocked()
	f.mu.Unlock()
}

// openRefusal returns why an Open in progress must give up: any write
// blocked (a full disk) or a fatal state. nil means carry on.
func (f *faults) openRefusal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, f.fatal)
	}
	if b := f.oldestLocked(nil); b != nil {
		return classify(b.err, "%s: %v", b.what, b.err)
	}
	return nil
}

// stuck reports why Pebble cannot be closed cleanly: a write it cannot
// survive is blocked or parked, or it reported a fatal state. nil means
// it can be closed.
func (f *faults) stuck() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return f.fatal
	}
	if b := f.oldestLocked(func(b *blockedOp) bool { return b.class.mustNotFail }); b != nil {
		return fmt.Errorf("%s: %w (retrying since %s)", b.what, b.err, b.since.Format(time.RFC3339))
	}
	return nil
}

// writeRefusal returns the error every write is refused with now, or nil.
// All writes are refused while Pebble cannot commit: a fatal state, a
// blocked write of its log or MANIFEST, or any blocked write while Pebble
// stalls writes (a commit would wait on it).
func (f *faults) writeRefusal() error {
	if f.calm.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, f.fatal)
	}
	stalled := f.stalled.Load()
	if b := f.oldestLocked(func(b *blockedOp) bool { return stalled || b.class.holdsCommits }); b != nil {
		return blockedError(b)
	}
	return nil
}

// growthRefusal returns the error a write that grows the store is refused
// with now because of a disk fault, or nil.
func (f *faults) growthRefusal() error {
	if f.calm.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.oldestLocked(nil); b != nil {
		return blockedError(b)
	}
	if f.flushErr != nil {
		return classify(f.flushErr, "writing to the disk failed: %v", f.flushErr)
	}
	return nil
}

// oldestLocked returns the longest-blocked write among those keep
// accepts (nil: all), or nil.
func (f *faults) oldestLocked(keep func(*blockedOp) bool) *blockedOp {
	var old *blockedOp
	for _, b := range f.blocked {
		if keep != nil && !keep(b) {
			continue
		}
		if old == nil || b.since.Before(old.since) {
			old = b
		}
	}
	return old
}

// blockedError describes a blocked write as the error writes are refused
// with: no space for a full disk, unavailable for any other failure.
func blockedError(b *blockedOp) error {
	if b.parked {
		return fmt.Errorf("%w: %s failed: %v; writes are refused until omnibus restarts",
			storage.ErrUnavailable, b.what, b.err)
	}
	return classify(b.err, "%s: %v (retrying since %s)", b.what, b.err, b.since.Format(time.RFC3339))
}

// classify wraps a disk error in storage.ErrNoSpace if it means the disk
// (or the user's quota) is full, and in storage.ErrUnavailable otherwise.
func classify(err error, format string, args ...any) error {
	kind := storage.ErrUnavailable
	if isNoSpace(err) {
		kind = storage.ErrNoSpace
	}
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// isNoSpace reports whether err means the disk or the quota is full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// isDiskFault reports whether err is a fault of the disk or of the
// process's resources, as opposed to a mistake in the call: worth retrying.
func isDiskFault(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS,
		syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN, syscall.EBUSY} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
