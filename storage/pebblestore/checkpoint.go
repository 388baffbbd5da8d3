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
// synced first). raftstore ships checkpoints to replicas that are behind.
func (s *Store) Checkpoint(dir string) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.leave()
	err := s.protect("checkpoint", false, nil, func() error {
		return s.db.Checkpoint(dir, pebble.WithFlushedWAL())
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("pebblestore: checkpoint into %s: %w", dir, err)
}
