package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"go.uber.org/zap"
)

// Store is a [storage.Store] backed by a Pebble database.
type Store struct {
	db      *pebble.DB
	dir     string
	fs      vfs.FS   // the file system under the store's fault handling
	ffs     *faultFS // the file system Pebble sees
	log     *zap.Logger
	gate    *gate
	faults  *faults
	reserve *reserve
	health  healthLog

	// Checking the write-ahead log on open (see onReplayed).
	repair     bool     // accept the loss of damaged log records
	mark       *walMark // how far the current log is synced
	markOK     bool     // the mark read at open is valid:
	markLog    uint32   // the log it names,
	markSynced int64    // and how far that log was synced

	// applyMu is held for reading by ordinary Apply calls and for writing
	// by the rare Apply that deletes a prefix with no upper bound (see
	// applyUnbounded), which must read and write without racing other
	// writers.
	applyMu sync.RWMutex

	committers committers // run Pebble's commits, so that Apply can stop waiting (commits.go)

	lazy lazySync // batches applied without Sync reach the disk soon
	// noWAL: Pebble writes no write-ahead log (Options.NoWAL); batches
	// are durable once flushed.
	noWAL bool

	fsync fsyncSource // the write-ahead log's fsync histogram, for metrics (metrics.go)

	singleDel singleDeletes // whether DeleteOnce is a SingleDelete yet (singledel.go)
}

var (
	_ storage.Store          = (*Store)(nil)
	_ storage.HealthReporter = (*Store)(nil)
)

// Sizes of Pebble's batch format: the header, and what a record adds to
// its key and value at most (kind, and two uvarint lengths).
const (
	batchHeaderLen      = 12
	batchRecordOverhead = 1 + 2*binary.MaxVarintLen32
)

// batchSize is at least the size of b in Pebble's batch format.
func batchSize(b *storage.Batch) int {
	size := batchHeaderLen
	for _, op := range b.Ops {
		size += batchRecordOverhead + len(op.Key) + len(op.Value)
		if op.Kind == storage.OpDeletePrefix {
			size += len(op.Key) // the range's end key
		}
	}
	return size
}

// Apply implements [storage.Store]. A batch holding an unknown
// [storage.OpKind] is rejected whole and changes nothing. An empty (or nil)
// batch does nothing, even with Sync set.
func (s *Store) Apply(b *storage.Batch) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	if b == nil || len(b.Ops) == 0 {
		return nil
	}
	unbounded := false
	for i, op := range b.Ops {
		switch op.Kind {
		case storage.OpSet, storage.OpDelete, storage.OpDeleteOnce:
		case storage.OpDeletePrefix:
			if _, ok := prefixEnd(op.Key); !ok {
				unbounded = true
			}
		default:
			return fmt.Errorf("pebblestore: op %d: unknown kind %d", i, op.Kind)
		}
	}
	if err := s.admit(b); err != nil {
		return err
	}
	if unbounded {
		return s.applyUnbounded(b)
	}

	s.applyMu.RLock()
	defer s.applyMu.RUnlock()
	// Sized up front: a batch that outgrows its buffer doubles it, copying
	// everything so far each time, and Pebble keeps no buffer over 1 MiB
	// for the next batch, so a send of a hundred 64 KiB messages copied
	// its bodies once more and allocated twice their size (allocation
	// profile, 64 KiB durable sends).
	pb := s.db.NewBatchWithSize(batchSize(b))
	single := s.singleDel.ok.Load()
	for _, op := range b.Ops {
		var err error
		switch op.Kind {
		case storage.OpSet:
			err = pb.Set(op.Key, op.Value, nil)
		case storage.OpDelete:
			err = pb.Delete(op.Key, nil)
		case storage.OpDeleteOnce:
			err = deleteOnce(pb, op.Key, single)
		case storage.OpDeletePrefix:
			end, _ := prefixEnd(op.Key)
			err = pb.DeleteRange(op.Key, end, nil)
		}
		if err != nil {
			_ = pb.Close()
			return fmt.Errorf("pebblestore: build batch: %w", err)
		}
	}
	return s.commit(pb, b.Sync)
}

// deleteOnce adds a DeleteOnce of key to pb: a SingleDelete once the
// database is ready for them (single), a Delete until then (singledel.go).
func deleteOnce(pb *pebble.Batch, key []byte, single bool) error {
	if single {
		return pb.SingleDelete(key, nil)
	}
	return pb.Delete(key, nil)
}

// applyUnbounded applies a batch that deletes a prefix with no successor
// key (empty, or all 0xff bytes). DeleteRange needs an end key, so such a
// deletion becomes point deletions of the keys present. To stay atomic it
// excludes every other writer while it reads, and it reads through an
// indexed batch so that the batch's own earlier operations are seen.
func (s *Store) applyUnbounded(b *storage.Batch) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	pb := s.db.NewIndexedBatch()
	single := s.singleDel.ok.Load()
	for _, op := range b.Ops {
		var err error
		switch op.Kind {
		case storage.OpSet:
			err = pb.Set(op.Key, op.Value, nil)
		case storage.OpDelete:
			err = pb.Delete(op.Key, nil)
		case storage.OpDeleteOnce:
			err = deleteOnce(pb, op.Key, single)
		case storage.OpDeletePrefix:
			if end, ok := prefixEnd(op.Key); ok {
				err = pb.DeleteRange(op.Key, end, nil)
			} else {
				err = deleteFrom(pb, op.Key)
			}
		}
		if err != nil {
			_ = pb.Close()
			return fmt.Errorf("pebblestore: build batch: %w", err)
		}
	}
	return s.commit(pb, b.Sync)
}

// deleteFrom adds to the indexed batch pb a deletion of every key >= lo
// that it (with the database beneath it) holds.
func deleteFrom(pb *pebble.Batch, lo []byte) error {
	it, err := pb.NewIter(&pebble.IterOptions{LowerBound: lowerBound(lo)})
	if err != nil {
		return err
	}
	var keys [][]byte
	for valid := it.First(); valid; valid = it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, k := range keys {
		if err := pb.Delete(k, nil); err != nil {
			return err
		}
	}
	return nil
}

// commit commits pb, waiting for the WAL fsync if sync is set, and closes
// it. Concurrent callers share fsyncs through Pebble's commit pipeline.
// Without sync the batch reaches the disk with the next synced commit, or
// within the lazy sync delay. If the disk fails for good meanwhile,
// commit returns without waiting further (see commitWatched).
func (s *Store) commit(pb *pebble.Batch, sync bool) error {
	sync = sync && !s.noWAL // without a write-ahead log there is nothing to sync, now or lazily
	wo, n := pebble.NoSync, s.lazy.beforeSynced()
	if sync {
		wo = pebble.Sync
	}
	if err := s.commitWatched(pb, wo); err != nil {
		if errors.Is(err, storage.ErrUnavailable) {
			return err
		}
		return fmt.Errorf("pebblestore: commit: %w", err)
	}
	switch {
	case sync:
		s.lazy.afterSynced(n)
	case !s.noWAL:
		s.lazy.noteUnsynced(s)
	}
	return nil
}

// Get implements [storage.Store].
func (s *Store) Get(key []byte) ([]byte, error) {
	if err := s.gate.enter(); err != nil {
		return nil, err
	}
	defer s.gate.leave()
	var out []byte
	err := s.protect("get", false, nil, func() error {
		v, closer, err := s.db.Get(key)
		if err != nil {
			return err
		}
		out = bytes.Clone(v)
		if out == nil {
			out = []byte{}
		}
		return closer.Close()
	})
	if err != nil {
		if errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrUnavailable) {
			return nil, err // a panic, already described
		}
		return nil, s.readError("get", err)
	}
	return out, nil
}

// Scan implements [storage.Store]. It reads a consistent snapshot: the
// database as it was when Scan was called. The slices passed to fn belong to
// the iterator and change on the next call.
func (s *Store) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	lo := prefix
	if bytes.Compare(start, prefix) > 0 {
		lo = start
	}
	hi, bounded := prefixEnd(prefix)
	if bounded && bytes.Compare(lo, hi) >= 0 {
		return nil // start is past every key with the prefix
	}
	// fnErr is the callback's own error, returned as it is; any other
	// error is the store's.
	var fnErr error
	inFn := false
	err := s.protect("scan", false, &inFn, func() error {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lowerBound(lo), UpperBound: hi})
		if err != nil {
			return err
		}
		fnErr, err = scan(it, func(k, v []byte) (bool, error) {
			inFn = true // left set if fn panics: see protect
			more, err := fn(k, v)
			inFn = false
			return more, err
		})
		return errors.Join(err, it.Close())
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrUnavailable):
		return err // a panic, already described
	}
	return s.readError("scan", err)
}

// scan feeds fn from it until either is done. It returns fn's error apart
// from the iterator's.
func scan(it *pebble.Iterator, fn func(key, value []byte) (bool, error)) (fnErr, err error) {
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		more, err := fn(it.Key(), v)
		if err != nil {
			return err, nil
		}
		if !more {
			return nil, nil
		}
	}
	return nil, it.Error()
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix, and false if there is none (prefix is empty or all 0xff).
func prefixEnd(prefix []byte) ([]byte, bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end, true
		}
	}
	return nil, false
}

// lowerBound maps an empty lower bound to nil. Both mean "from the first
// key", but Pebble's invariant checks (enabled under -race) index into a
// non-nil empty bound.
func lowerBound(lo []byte) []byte {
	if len(lo) == 0 {
		return nil
	}
	return lo
}
