package pebblestore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/omnibusmq/omnibus/storage"
)

// Checkpoint writes a consistent copy of the store, as it is at the
// moment of the call, into dir, which must not exist yet: a database that
// [Open] opens like any other. Files are hard-linked where the file system
// allows, so a checkpoint costs little space until the store compacts
// away from it. Batches applied without Sync are included (the log is
// synced first; with Options.NoWAL the memtables are flushed first). raftstore ships checkpoints to replicas that are behind.
func (s *Store) Checkpoint(dir string) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	err := s.protect("checkpoint", false, nil, func() error {
		if s.noWAL { // the memtables are in no file: flush them first
			if err := s.db.Flush(); err != nil {
				return err
			}
		}
		if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
			return err
		}
		if s.singleDel.ok.Load() { // a copy of a database ready for single deletes is ready too
			return writeMarker(s.fs, dir)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
}

// StartFlush starts writing the memtables to sstables: with
// Options.NoWAL, what makes the batches applied so far durable. The
// channel is closed once they are (Pebble retries a flush the disk
// refuses, so it may stay open while the disk fails).
func (s *Store) StartFlush() (<-chan struct{}, error) {
	if err := s.gate.enter(); err != nil {
		return nil, err
	}
	defer s.gate.leave()
	var done <-chan struct{}
	err := s.protect("flush", true, nil, func() error {
		var err error
		done, err = s.db.AsyncFlush()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: flush: %w", err)
	}
	return done, nil
}
