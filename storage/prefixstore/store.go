// Package prefixstore gives a [storage.Store] view of one key range of
// another store: every key a caller passes is stored under a fixed
// prefix, and scans see only that range, with the prefix taken off again.
//
// omnibus runs each namespace but the first as a core broker over such a
// view of the one store (core/namespace), so that namespaces are isolated
// by construction (a broker cannot name a key outside its range) and a
// namespace is dropped, with everything it holds, by one DeletePrefix of
// its range. The view adds no state and no goroutine: a batch applied
// through it is one batch of the store underneath, with the same
// atomicity, durability and fault contract.
package prefixstore

import (
	"bytes"
	"sync"

	"github.com/omnibusmq/omnibus/storage"
)

// Store is a view of the keys of an underlying store that start with a
// prefix. It is safe for concurrent use if the underlying store is.
type Store struct {
	under  storage.Store
	prefix []byte
}

// New returns the view of under's keys starting with prefix. Closing the
// view does not close under, which the caller owns. prefix must not be
// empty, and no two views in use may have prefixes of which one starts
// with the other.
func New(under storage.Store, prefix []byte) *Store {
	if len(prefix) == 0 {
		panic("prefixstore: empty prefix")
	}
	return &Store{under: under, prefix: bytes.Clone(prefix)}
}

// Prefix returns the prefix of the view's range. The caller must not
// modify it.
func (s *Store) Prefix() []byte { return s.prefix }

// key returns k under the view's prefix, in a new slice.
func (s *Store) key(k []byte) []byte {
	out := make([]byte, 0, len(s.prefix)+len(k))
	return append(append(out, s.prefix...), k...)
}

// scratch is the prefixed copy of a batch, reused: the store underneath
// keeps nothing of a batch once Apply returns (storage.Store).
type scratch struct {
	b   storage.Batch
	buf []byte
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledKeys bounds the key bytes a pooled scratch keeps, so that one
// huge batch does not pin its buffer.
const maxPooledKeys = 64 << 10

// Apply applies b under the prefix: a DeletePrefix deletes only within
// the view's range (an empty one deletes all of it).
func (s *Store) Apply(b *storage.Batch) error {
	if b == nil {
		return s.under.Apply(nil)
	}
	sc := scratches.Get().(*scratch)
	n := 0
	for _, op := range b.Ops {
		n += len(s.prefix) + len(op.Key)
	}
	if cap(sc.buf) < n {
		sc.buf = make([]byte, 0, n)
	}
	buf := sc.buf[:0]
	ops := sc.b.Ops[:0]
	for _, op := range b.Ops {
		start := len(buf)
		buf = append(append(buf, s.prefix...), op.Key...)
		ops = append(ops, storage.Op{Kind: op.Kind, New: op.New, Key: buf[start:len(buf):len(buf)], Value: op.Value})
	}
	sc.b.Ops, sc.b.Sync = ops, b.Sync
	err := s.under.Apply(&sc.b)
	clear(sc.b.Ops) // drop the references to the caller's values
	sc.b.Ops = sc.b.Ops[:0]
	if cap(buf) <= maxPooledKeys {
		sc.buf = buf[:0]
		scratches.Put(sc)
	}
	return err
}

// Get returns the value stored at key within the view.
func (s *Store) Get(key []byte) ([]byte, error) {
	return s.under.Get(s.key(key))
}

// Scan scans the view's keys with the given prefix from start, passing
// fn the keys without the view's prefix.
func (s *Store) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	var st []byte
	if start != nil {
		st = s.key(start)
	}
	n := len(s.prefix)
	return s.under.Scan(s.key(prefix), st, func(k, v []byte) (bool, error) {
		return fn(k[n:], v)
	})
}

// Close does nothing: the underlying store is the caller's to close.
// Methods keep working until it is closed.
func (s *Store) Close() error { return nil }
