package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// stateFile names the live state database inside the node's directory.
const stateFile = "STATE"

// stateStore is the node's state database: the broker's data under
// dataPrefix and the applied index. Installing a snapshot replaces the
// whole database with a checkpoint received from the leader: the pointer
// is swapped, then the old database closed (its gate lets calls in
// progress finish; later ones fail with ErrClosed, which calls report as
// ErrUnavailable). Only the loop swaps, so name needs no lock.
type stateStore struct {
	dir  string // the node's directory
	opts pebblestore.Options

	db   atomic.Pointer[pebblestore.Store]
	name string // the live database's directory name, state-NNNNNN
}

// openStateStore opens the database STATE names, creating state-000001
// for a new node, and removes leftovers of an interrupted swap.
func openStateStore(dir string, opts pebblestore.Options) (*stateStore, error) {
	s := &stateStore{dir: dir, opts: opts}
	name, err := os.ReadFile(filepath.Join(dir, stateFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.name = stateDirName(1)
		if err := writeFileAtomic(filepath.Join(dir, stateFile), []byte(s.name+"\n")); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("raftstore: %w: %v", storage.ErrUnavailable, err)
	default:
		s.name = strings.TrimSpace(string(name))
		if _, ok := stateDirNumber(s.name); !ok {
			return nil, fmt.Errorf("raftstore: %w: %s names %q", storage.ErrCorrupt, stateFile, s.name)
		}
	}
	s.removeStale()
	db, err := pebblestore.Open(filepath.Join(dir, s.name), opts)
	if err != nil {
		return nil, err
	}
	s.db.Store(db)
	return s, nil
}

func stateDirName(n int) string { return fmt.Sprintf("state-%06d", n) }

func stateDirNumber(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "state-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// removeStale deletes state databases other than the live one and
// snapshot scratch directories: what a crash during a swap or a transfer
// leaves.
func (s *stateStore) removeStale() {
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		n := e.Name()
		if _, ok := stateDirNumber(n); (ok && n != s.name) || strings.HasPrefix(n, snapScratchPrefix) {
			_ = os.RemoveAll(filepath.Join(s.dir, n))
		}
	}
}

// applied reads the applied index and term (zero for a new database).
func (s *stateStore) applied() (index, term uint64, err error) {
	v, err := s.db.Load().Get(metaApplied)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return parseApplied(v)
}

// apply applies a batch built by the loop (keys already prefixed).
func (s *stateStore) apply(b *storage.Batch) error {
	return s.db.Load().Apply(b)
}

// get reads a core key.
func (s *stateStore) get(key []byte) ([]byte, error) {
	k := make([]byte, 0, len(key)+1)
	k = append(append(k, dataPrefix), key...)
	v, err := s.db.Load().Get(k)
	return v, swapped(err)
}

// scan scans core keys, handing fn the keys without their prefix.
func (s *stateStore) scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	p := append([]byte{dataPrefix}, prefix...)
	var st []byte
	if start != nil {
		st = append([]byte{dataPrefix}, start...)
	}
	return swapped(s.db.Load().Scan(p, st, func(k, v []byte) (bool, error) { return fn(k[1:], v) }))
}

// swapped reports a call that met a database closed by a swap as
// unavailable: the node is a follower by then, and its store is not the
// caller's to read.
func swapped(err error) error {
	if errors.Is(err, storage.ErrClosed) {
		return fmt.Errorf("%w: raftstore: the state database was replaced by a snapshot", storage.ErrUnavailable)
	}
	return err
}

// flushAsync starts flushing the database's memtables, which is what
// makes applied batches durable (it has no write-ahead log: the Raft log
// is the durable copy).
func (s *stateStore) flushAsync() (<-chan struct{}, error) {
	done, err := s.db.Load().StartFlush()
	return done, swapped(err)
}

// health is the database's health.
func (s *stateStore) health() error {
	return s.db.Load().Health()
}

// checkpoint writes a checkpoint of the database into dir.
func (s *stateStore) checkpoint(dir string) error {
	return swapped(s.db.Load().Checkpoint(dir))
}

// install replaces the database with the checkpoint in dir (which it
// takes over): the checkpoint is moved to the next state-NNNNNN name and
// opened there, STATE is pointed at it atomically, and the old database
// is removed. It returns the installed database's applied index and term.
//
// A failed install (a disk that refuses the open: ENOSPC, EMFILE, EIO)
// leaves the checkpoint under its new name, where the next call with the
// same dir finds and opens it: the caller retries until the disk takes
// it. A checkpoint found in neither place cannot be installed by trying
// again; that error wraps storage.ErrCorrupt.
func (s *stateStore) install(dir string) (index, term uint64, err error) {
	n, _ := stateDirNumber(s.name)
	next := stateDirName(n + 1)
	path := filepath.Join(s.dir, next)
	if err := s.place(dir, path); err != nil {
		return 0, 0, err
	}
	db, err := pebblestore.Open(path, s.opts)
	if err != nil {
		return 0, 0, fmt.Errorf("raftstore: open received snapshot: %w", err)
	}
	v, err := db.Get(metaApplied)
	if err == nil {
		index, term, err = parseApplied(v)
	}
	if err == nil {
		err = writeFileAtomic(filepath.Join(s.dir, stateFile), []byte(next+"\n"))
	}
	if err != nil {
		db.Close()
		return 0, 0, fmt.Errorf("raftstore: install snapshot: %w", err)
	}
	old, oldName := s.db.Swap(db), s.name
	s.name = next
	_ = old.Close()
	_ = os.RemoveAll(filepath.Join(s.dir, oldName))
	return index, term, nil
}

// place moves the received checkpoint dir to path, unless an earlier
// attempt of the same install did.
func (s *stateStore) place(dir, path string) error {
	_, err := os.Stat(dir)
	switch {
	case err == nil:
		if err := os.Rename(dir, path); err != nil {
			return fmt.Errorf("raftstore: install snapshot: %w: %v", storage.ErrUnavailable, err)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("raftstore: install snapshot: %w: %v", storage.ErrUnavailable, err)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raftstore: install snapshot: %w: the received checkpoint is gone (neither %s nor %s exists)",
				storage.ErrCorrupt, dir, path)
		}
		return fmt.Errorf("raftstore: install snapshot: %w: %v", storage.ErrUnavailable, err)
	}
	return nil
}

func (s *stateStore) close() error {
	return s.db.Load().Close()
}

// writeFileAtomic replaces path with data: written to a temporary file,
// fsynced, renamed over path, and the directory fsynced.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %v", storage.ErrUnavailable, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
