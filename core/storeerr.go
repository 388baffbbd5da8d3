package core

import (
	"errors"

	"github.com/omnibusmq/omnibus/storage"
)

// Storage faults.
//
// The store reports a fault with an error wrapping one of storage's
// sentinels. The core turns them into its own codes here, in one place:
//
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
