package coretest

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// FaultStore decorates a [storage.Store] with faults injected on command,
// the way a disk fails under a real store: a write refused (no space, an
// I/O error), a read that fails, a value that comes back damaged. Tests
// of the core drive every write path through it; the fronts can use it to
// see what a client gets.
type FaultStore struct {
	storage.Store

	mu       sync.Mutex // guards the fields below
	skip     int        // Applies to let through before failing
	fails    int        // Applies to fail after those; < 0: every one
	applyErr error
	every    int // with applyErr: fail every every-th Apply (FailEvery)
	onApply  func(*storage.Batch) error
	readErr  error             // every Get and Scan fails with it, when set
	keyErrs  map[string]error  // Get of these keys (and a Scan reaching them) fails
	values   map[string][]byte // Get and Scan return these values instead

	Applies atomic.Int64 // Apply calls made
	Failed  atomic.Int64 // Apply calls failed by a fault
}

// NewFault returns a broker on a memstore (kept across restarts) seen
// through a FaultStore, and that store.
func NewFault(t testing.TB) (*Env, *FaultStore) {
	t.Helper()
	fs := &FaultStore{}
	env := NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if prev == nil {
			fs.Store = MemOpener(t, nil)
		}
		return fs
	})
	return env, fs
}

// FailApplies makes Apply fail with err: after skip more calls succeed,
// the next n calls fail (n < 0: every call until Heal).
func (f *FaultStore) FailApplies(skip, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skip, f.fails, f.applyErr = skip, n, err
}

// FailEvery makes every n-th Apply fail with err, until Heal.
func (f *FaultStore) FailEvery(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skip, f.fails, f.every, f.applyErr = 0, 0, n, err
}

// OnApply calls fn at the start of every Apply, outside any lock, until
// Heal; an error from fn fails that Apply. Tests use it to hold a write
// inside the store while others run.
func (f *FaultStore) OnApply(fn func(*storage.Batch) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onApply = fn
}

// FailReads makes every Get and Scan fail with err until Heal.
func (f *FaultStore) FailReads(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErr = err
}

// FailKey makes Get of key fail with err, and a Scan fail with it when it
// reaches key, until Heal.
func (f *FaultStore) FailKey(key []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keyErrs == nil {
		f.keyErrs = make(map[string]error)
	}
	f.keyErrs[string(key)] = err
}

// Garble makes reads of key return v instead of what is stored (a damaged
// value the store did not notice), until Heal.
func (f *FaultStore) Garble(key, v []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.values == nil {
		f.values = make(map[string][]byte)
	}
	f.values[string(key)] = append([]byte(nil), v...)
}

// Heal ends every fault.
func (f *FaultStore) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skip, f.fails, f.every, f.applyErr, f.readErr, f.keyErrs, f.values = 0, 0, 0, nil, nil, nil, nil
	f.onApply = nil
}

// Apply fails if a fault says so, and applies b otherwise.
func (f *FaultStore) Apply(b *storage.Batch) error {
	n := f.Applies.Add(1)
	f.mu.Lock()
	hook := f.onApply
	f.mu.Unlock()
	if hook != nil {
		if err := hook(b); err != nil {
			f.Failed.Add(1)
			return err
		}
	}
	f.mu.Lock()
	var err error
	switch {
	case f.applyErr != nil && f.every > 0:
		if n%int64(f.every) == 0 {
			err = f.applyErr
		}
	case f.applyErr == nil || f.fails == 0:
	case f.skip > 0:
		f.skip--
	default:
		err = f.applyErr
		if f.fails > 0 {
			f.fails--
		}
	}
	f.mu.Unlock()
	if err != nil {
		f.Failed.Add(1)
		return err
	}
	return f.Store.Apply(b)
}

// Get fails or returns a garbled value if a fault says so.
func (f *FaultStore) Get(key []byte) ([]byte, error) {
	f.mu.Lock()
	err := f.readErr
	if err == nil {
		err = f.keyErrs[string(key)]
	}
	v, garbled := f.values[string(key)]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if garbled {
		return append([]byte(nil), v...), nil
	}
	return f.Store.Get(key)
}

// Scan fails or shows garbled values if a fault says so.
func (f *FaultStore) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	f.mu.Lock()
	err := f.readErr
	faulty := len(f.keyErrs) > 0 || len(f.values) > 0
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if !faulty {
		return f.Store.Scan(prefix, start, fn)
	}
	return f.Store.Scan(prefix, start, func(k, v []byte) (bool, error) {
		f.mu.Lock()
		err := f.keyErrs[string(k)]
		g, garbled := f.values[string(k)]
		f.mu.Unlock()
		if err != nil {
			return false, err
		}
		if garbled {
			v = g
		}
		return fn(k, v)
	})
}
