package core

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Storage faults.
//
// The store reports a fault with an error wrapping one of storage's
// sentinels. The core turns them into its own codes here, in one place:
//
//	storage.ErrOutcomeUnknown → CodeOutcomeUnknown: the disk failed while
//	    the write was being committed, so it may or may not be stored (the
//	    AMQP front answers Service Bus's ServiceTimeout for it, whose
//	    outcome is documented as unknown; a retried send may be stored
//	    twice)
//	storage.ErrNoSpace, storage.ErrUnavailable  → CodeServerBusy: nothing
//	    was written, the caller may retry once the disk recovers (Service
//	    Bus's server-busy, which every SDK retries with back-off)
//	storage.ErrCorrupt, storage.ErrNotFound on a body read → the body is
//	    damaged: the message is dead-lettered (bodies.go), never retried
//	anything else → CodeInternal
//
// Every such error keeps the store's error as its cause, so errors.Is
// against the storage sentinels still works.

// storeError converts an error of the store into a core *Error. Errors
// that already are core errors pass through.
func storeError(err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(err, storage.ErrOutcomeUnknown):
		return &Error{Code: CodeOutcomeUnknown, cause: err,
			Msg: "The operation did not complete: the server's disk failed while storing it, so it may or may not have been stored. " +
				"Retrying may store a message twice. (" + err.Error() + ")"}
	case errors.Is(err, storage.ErrNoSpace):
		return &Error{Code: CodeServerBusy, cause: err,
			Msg: "The server is busy: its data disk has no space left, so nothing was written. Please retry later. (" + err.Error() + ")"}
	case errors.Is(err, storage.ErrUnavailable):
		return &Error{Code: CodeServerBusy, cause: err,
			Msg: "The server is busy: its store cannot be used right now, so nothing was written. Please retry later. (" + err.Error() + ")"}
	}
	return &Error{Code: CodeInternal, Msg: "storage: " + err.Error(), cause: err}
}

// damaged reports whether err, from reading a message's body, says the
// body is gone or unreadable for good (as opposed to a store that cannot
// read right now, which a retry may get past).
func damaged(err error) bool {
	return errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrCorrupt) || errors.Is(err, errCorrupt)
}

// apply applies a batch that holds no reservation (management, session
// state), returning the store's error as a core error.
func (b *Broker) apply(batch *storage.Batch) error {
	return storeError(b.store.Apply(batch))
}

// warnInterval is how often one kind of storage-failure warning is
// logged at most: a disk that refuses every write must not flood the log
// with one line per message.
const warnInterval = 10 * time.Second

// warnStorage logs a warning about a storage failure the broker worked
// around, at most once per warnInterval for each msg (a constant), with
// the number of times it happened since it was last logged.
func (b *Broker) warnStorage(msg string, fields ...zap.Field) {
	now := b.clk.Now()
	b.warned.Lock()
	if b.warned.m == nil {
		b.warned.m = make(map[string]*warnState)
	}
	s := b.warned.m[msg]
	if s == nil {
		s = &warnState{}
		b.warned.m[msg] = s
	}
	s.n++
	if !s.last.IsZero() && now.Sub(s.last) < warnInterval {
		b.warned.Unlock()
		return
	}
	n := s.n
	s.last, s.n = now, 0
	b.warned.Unlock()
	b.log.Warn(msg, append(fields, zap.Int("times", n))...)
}

// warnState is the throttle of one warning.
type warnState struct {
	last time.Time
	n    int
}
