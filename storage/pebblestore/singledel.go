package pebblestore

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// Single deletes.
//
// storage.Batch.DeleteOnce becomes Pebble's SingleDelete. A Delete must
// survive every flush and compaction until it reaches the bottom of the
// tree, because an older value of its key may lie in any level beneath;
// a queue's message records are deleted soon after they are written, so
// each send used to leave a tombstone that was written to L0 and
// compacted down, and every body that outlived a memtable was written
// into a blob file before its deletion caught up with it. A SingleDelete
// instead cancels with the one Set it meets, in the memtable's flush or
// in a compaction, and both vanish: a message sent and settled within one
// memtable's life leaves nothing on disk but its write-ahead log records.
//
// Its condition is the caller's (storage.Batch.DeleteOnce): the key was
// set at most once since its last deletion. A key set twice would show
// its older value again once the SingleDelete and the newer Set cancel.
// Pebble reports such a meeting when it sees one in a compaction
// (PossibleAPIMisuse, NondeterministicSingleDelete): the store logs it
// as an error and counts it (Store.singleDeleteMisuses).
//
// Databases written before DeleteOnce existed may hold keys set twice
// that the core now deletes once (a dead-lettered or modified message's
// body was rewritten in place). Such a database gets one compaction of
// its whole key space, in the background after Open, which leaves one
// version of every key; a marker file (singleDelMarkName) then records
// that every key satisfies the condition, and only from then on is
// DeleteOnce applied as SingleDelete. Until then, and if the compaction
// or the marker fails, DeleteOnce is applied as Delete, which is always
// correct. A new database is marked at once; a checkpoint of a marked
// database is marked too.

// singleDelMarkName is the marker file, in the database directory, that
// says DeleteOnce may be applied as SingleDelete.
const singleDelMarkName = "OMNIBUS-SINGLEDEL"

// singleDeletes is the store's state of single deletes.
type singleDeletes struct {
	ok      atomic.Bool  // DeleteOnce is applied as SingleDelete
	misuses atomic.Int64 // SingleDeletes Pebble saw meet a key set twice
	cancel  context.CancelFunc
	done    chan struct{} // closed when the upgrade compaction is over
}

// prepareSingleDeletes decides, at Open, whether DeleteOnce may be a
// SingleDelete, and starts the upgrade compaction of a database that
// predates the marker.
func (s *Store) prepareSingleDeletes() {
	sd := &s.singleDel
	sd.done = make(chan struct{})
	path := s.fs.PathJoin(s.dir, singleDelMarkName)
	if _, err := s.fs.Stat(path); err == nil {
		sd.ok.Store(true)
		close(sd.done)
		return
	}
	empty, err := s.isEmpty()
	if err == nil && empty {
		if err := writeMarker(s.fs, s.dir); err != nil {
			s.log.Warn("cannot mark the database for single deletes; deletions stay ordinary ones", zap.Error(err))
		} else {
			sd.ok.Store(true)
		}
		close(sd.done)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sd.cancel = cancel
	go s.upgradeSingleDeletes(ctx)
}

// isEmpty reports whether the database holds no key.
func (s *Store) isEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, errors.Join(it.Error(), it.Close())
}

// upgradeSingleDeletes compacts the whole key space once, so that no key
// keeps two versions, then marks the database and turns single deletes on.
func (s *Store) upgradeSingleDeletes(ctx context.Context) {
	defer close(s.singleDel.done)
	if err := s.gate.enter(); err != nil {
		return
	}
	defer s.gate.leave()
	err := s.protect("compact for single deletes", false, nil, func() error {
		it, err := s.db.NewIter(nil)
		if err != nil {
			return err
		}
		var first, last []byte
		if it.First() {
			first = append([]byte(nil), it.Key()...)
			if it.Last() {
				last = append(append([]byte(nil), it.Key()...), 0)
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil || first == nil || last == nil {
			return err
		}
		s.log.Info("compacting the database once, so that deletions of message records can be single deletes")
		return s.db.Compact(ctx, first, last, true)
	})
	if err == nil {
		err = writeMarker(s.fs, s.dir)
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("cannot prepare the database for single deletes; deletions stay ordinary ones until the next open", zap.Error(err))
		}
		return
	}
	s.singleDel.ok.Store(true)
	s.log.Info("database ready for single deletes")
}

// stopSingleDeleteUpgrade cancels the upgrade compaction, if one runs.
func (s *Store) stopSingleDeleteUpgrade() {
	if s.singleDel.cancel != nil {
		s.singleDel.cancel()
	}
}

// writeMarker creates the marker file in dir, durably.
func writeMarker(fs vfs.FS, dir string) error {
	f, err := fs.Create(fs.PathJoin(dir, singleDelMarkName), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("DeleteOnce is SingleDelete: every key was set at most once since its last deletion\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// onAPIMisuse receives Pebble's reports of SingleDeletes that met what
// they should not: a second Set is the caller's broken invariant (an
// older value may come back); a Delete or another SingleDelete is
// harmless (the SingleDelete becomes a Delete).
func (s *Store) onAPIMisuse(info pebble.PossibleAPIMisuseInfo) {
	switch info.Kind {
	case pebble.NondeterministicSingleDelete:
		s.singleDel.misuses.Add(1)
		s.log.Error("a single delete met a key set more than once since its last deletion: an older value may come back",
			zap.Binary("key", info.UserKey))
	default:
		s.log.Debug("pebble: possible API misuse", zap.String("info", info.String()))
	}
}
