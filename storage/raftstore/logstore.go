package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// Keys of the raft log database.
var (
	keyHardState = []byte("h")
	keySnapshot  = []byte("s") // the latest snapshot's metadata (no data)
	keyIdentity  = []byte("i") // the node id this directory belongs to
	prefixEntry  = []byte("e") // + 8-byte big-endian index
)

func entryKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{'e'}, index)
}

// logStore keeps Raft's log, HardState and snapshot metadata in a Pebble
// database of their own, and mirrors them in a raft.MemoryStorage that
// raft reads (the log is kept short by compaction, so it fits in memory).
// Only the node's loop uses it.
type logStore struct {
	db  *pebblestore.Store
	mem *raft.MemoryStorage
	// dbFirst is the lowest entry index the database may hold: entries a
	// snapshot covered but kept for slow followers stay in the database
	// after a restart (memory drops them) until the next compaction.
	dbFirst uint64
}

// openLogStore opens the database in dir and loads it into memory. It
// returns fresh = true for an empty database.
func openLogStore(dir string, id uint64, opts pebblestore.Options) (ls *logStore, fresh bool, err error) {
	db, err := pebblestore.Open(dir, opts)
	if err != nil {
		return nil, false, err
	}
	ls = &logStore{db: db, mem: raft.NewMemoryStorage()}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	v, err := db.Get(keyIdentity)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		b := &storage.Batch{Sync: true}
		b.Set(keyIdentity, binary.BigEndian.AppendUint64(nil, id))
		return ls, true, db.Apply(b)
	case err != nil:
		return nil, false, err
	case len(v) != 8 || binary.BigEndian.Uint64(v) != id:
		return nil, false, fmt.Errorf("raftstore: %s belongs to another node (id %x), not %d", dir, v, id)
	}
	if err := ls.load(); err != nil {
		return nil, false, err
	}
	return ls, false, nil
}

// load fills the memory storage from the database: snapshot metadata,
// then the entries after it, then the HardState.
func (ls *logStore) load() error {
	if v, err := ls.db.Get(keySnapshot); err == nil {
		var snap pb.Snapshot
		if err := snap.Unmarshal(v); err != nil {
			return fmt.Errorf("raftstore: snapshot record: %w: %v", storage.ErrCorrupt, err)
		}
		if err := ls.mem.ApplySnapshot(snap); err != nil {
			return err
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	var ents []pb.Entry
	err := ls.db.Scan(prefixEntry, nil, func(k, v []byte) (bool, error) {
		var e pb.Entry
		if err := e.Unmarshal(v); err != nil {
			return false, fmt.Errorf("raftstore: log entry %x: %w: %v", k, storage.ErrCorrupt, err)
		}
		if len(ents) > 0 && e.Index != ents[len(ents)-1].Index+1 {
			return false, fmt.Errorf("raftstore: %w: log entry %d follows %d", storage.ErrCorrupt, e.Index, ents[len(ents)-1].Index)
		}
		ents = append(ents, e)
		return true, nil
	})
	if err != nil {
		return err
	}
	ls.dbFirst, _ = ls.mem.FirstIndex()
	if len(ents) > 0 {
		ls.dbFirst = min(ls.dbFirst, ents[0].Index)
	}
	if first, _ := ls.mem.FirstIndex(); len(ents) > 0 {
		// Entries the snapshot covers are dropped; a gap is damage.
		for len(ents) > 0 && ents[0].Index < first {
			ents = ents[1:]
		}
		if len(ents) > 0 && ents[0].Index != first {
			return fmt.Errorf("raftstore: %w: the log starts at %d, after the snapshot's %d", storage.ErrCorrupt, ents[0].Index, first-1)
		}
		if err := ls.mem.Append(ents); err != nil {
			return err
		}
	}
	if v, err := ls.db.Get(keyHardState); err == nil {
		var hs pb.HardState
		if err := hs.Unmarshal(v); err != nil {
			return fmt.Errorf("raftstore: hard state: %w: %v", storage.ErrCorrupt, err)
		}
		return ls.mem.SetHardState(hs)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return nil
}

// save makes a Ready's entries, HardState and snapshot durable (when
// mustSync), in one batch, then mirrors them in memory. The snapshot's
// data must already be installed in the state database.
func (ls *logStore) save(hs pb.HardState, ents []pb.Entry, snap pb.Snapshot, mustSync bool) error {
	b := &storage.Batch{Sync: mustSync}
	if !raft.IsEmptySnap(snap) {
		meta := pb.Snapshot{Metadata: snap.Metadata}
		v, err := meta.Marshal()
		if err != nil {
			return err
		}
		b.DeletePrefix(prefixEntry) // the snapshot replaces the whole log
		b.Set(keySnapshot, v)
	}
	if len(ents) > 0 {
		last, err := ls.mem.LastIndex()
		if err != nil {
			return err
		}
		// Entries past the new ones were overwritten by a new leader.
		for i := ents[len(ents)-1].Index + 1; i <= last; i++ {
			b.Delete(entryKey(i))
		}
		for i := range ents {
			v, err := ents[i].Marshal()
			if err != nil {
				return err
			}
			b.Set(entryKey(ents[i].Index), v)
		}
	}
	if !raft.IsEmptyHardState(hs) {
		v, err := hs.Marshal()
		if err != nil {
			return err
		}
		b.Set(keyHardState, v)
	}
	if len(b.Ops) > 0 {
		if err := ls.db.Apply(b); err != nil {
			return err
		}
	}
	if !raft.IsEmptySnap(snap) {
		if err := ls.mem.ApplySnapshot(snap); err != nil {
			return err
		}
		ls.dbFirst = snap.Metadata.Index + 1
	}
	if err := ls.mem.Append(ents); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(hs) {
		return ls.mem.SetHardState(hs)
	}
	return nil
}

// compact records a snapshot at applied index (with cs, the ConfState as
// of that index) and drops the log up to keepFrom-1. The state database
// must already be durable up to index.
func (ls *logStore) compact(index uint64, cs pb.ConfState, keepFrom uint64) error {
	snap, err := ls.mem.CreateSnapshot(index, &cs, nil)
	if err != nil {
		return err
	}
	meta := pb.Snapshot{Metadata: snap.Metadata}
	v, err := meta.Marshal()
	if err != nil {
		return err
	}
	first, err := ls.mem.FirstIndex()
	if err != nil {
		return err
	}
	b := &storage.Batch{Sync: true}
	b.Set(keySnapshot, v)
	for i := ls.dbFirst; i < keepFrom; i++ {
		b.Delete(entryKey(i))
	}
	if err := ls.db.Apply(b); err != nil {
		return err
	}
	ls.dbFirst = max(ls.dbFirst, keepFrom)
	if keepFrom > first {
		return ls.mem.Compact(keepFrom - 1)
	}
	return nil
}

func (ls *logStore) close() error { return ls.db.Close() }
