package raftstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// DefaultSegmentBytes is the size of one segment file of the Raft log
// (preallocated). A batch larger than that gets a segment of its own.
const DefaultSegmentBytes = 64 << 20

// logStore keeps Raft's log, HardState and snapshot metadata in
// append-only segment files (segrecord.go has the format, DESIGN.md the
// why), and mirrors them in a raft.MemoryStorage that raft reads (the log
// is kept short by compaction, so it fits in memory). Only the appender
// writes it (Open and Close aside); the fsync histogram is read by
// anyone.
type logStore struct {
	dir      string
	id       uint64
	fs       logFS
	log      *zap.Logger
	segBytes int64
	mem      *raft.MemoryStorage

	// segs are the segment files, oldest first; the last is act's.
	segs []*segment
	act  *activeSegment
	// hsDirty: the HardState in mem moved (its commit index only) since
	// it was last written; it goes with the next write.
	hsDirty bool
	buf     []byte // reused for each write
	// hasSpare: spare.tmp is a segment file compaction freed, to be
	// written over as the next segment (segrecycle.go).
	hasSpare bool

	fsyncs prometheus.Histogram // of the fdatasyncs (seghist.go)
	closed atomic.Bool
}

// segment is one segment file.
type segment struct {
	seq  uint64
	path string
	// maxIndex is the highest entry index written in it (0: none). Once
	// the log is compacted past it, the file goes whole.
	maxIndex uint64
}

// activeSegment is the segment being written.
type activeSegment struct {
	seg *segment
	f   logFile
	// off is where the next record goes; synced how far the file is
	// known durable (off, unless failed).
	off, synced int64
	alloc       int64 // the size reserved with fallocate
	prevEnd     int64 // what its header says of the previous segment
	writes      int   // writes since its opening records
	// failed: a write, an fdatasync or the directory's fsync failed.
	// Nothing past synced is trusted (after a failed fsync the kernel may
	// have dropped pages it could not write): the next write starts a new
	// segment whose header says the old one ends at synced, or rewrites
	// this one from its start if not even its opening records became
	// durable.
	failed bool
	// dirSynced: the segment's directory entry is durable.
	dirSynced bool
	// recycled: the file held an older segment (segrecycle.go).
	recycled bool
}

// logOptions configure openLogStore.
type logOptions struct {
	fs logFS // nil: the real file system
	// repair cuts the log at damage instead of refusing to open.
	repair       bool
	log          *zap.Logger
	segmentBytes int64 // 0: DefaultSegmentBytes
}

// openLogStore opens the log in dir (creating it) and loads it into
// memory. It returns fresh = true for a new log.
func openLogStore(dir string, id uint64, o logOptions) (ls *logStore, fresh bool, err error) {
	if o.fs == nil {
		o.fs = osLogFS{}
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.segmentBytes <= 0 {
		o.segmentBytes = DefaultSegmentBytes
	}
	ls = &logStore{dir: dir, id: id, fs: o.fs, log: o.log, segBytes: o.segmentBytes, mem: raft.NewMemoryStorage(),
		fsyncs: newFsyncHist()}
	if err := ls.fs.MkdirAll(dir); err != nil {
		return nil, false, ls.unavailable("creating "+dir, err)
	}
	names, err := ls.fs.ReadDir(dir)
	if err != nil {
		return nil, false, ls.unavailable("reading "+dir, err)
	}
	var seqs []uint64
	for _, name := range names {
		if name == "CURRENT" || strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "OPTIONS-") {
			return nil, false, fmt.Errorf("raftstore: %s is a Pebble database, the Raft log of an earlier build; "+
				"this build keeps the log in segment files and does not convert it: start the cluster afresh "+
				"(empty --cluster-dir on every node)", dir)
		}
		if seq, ok := parseSegName(name); ok {
			seqs = append(seqs, seq)
		}
		if name == spareName {
			ls.hasSpare = true
		}
	}
	defer func(ls *logStore) {
		if err != nil {
			if ls.act != nil {
				ls.act.f.Close()
			}
		}
	}(ls)
	if len(seqs) == 0 {
		// A new directory: its entry in the cluster directory must last.
		if err := ls.fs.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, false, ls.unavailable("syncing "+filepath.Dir(dir), err)
		}
		return ls, true, ls.create()
	}
	fresh, err = ls.load(seqs, o.repair)
	if err != nil {
		return nil, false, err
	}
	return ls, fresh, nil
}

// save makes a Ready's entries, HardState and snapshot durable, in one
// write and one fdatasync, then mirrors them in memory. The snapshot's
// data must already be installed in the state database. A HardState that
// only moves the commit index (mustSync false, no entries) is not written
// at once: Raft does not need it durable (it learns the commit index
// again); it goes with the next write.
func (ls *logStore) save(hs pb.HardState, ents []pb.Entry, snap pb.Snapshot, mustSync bool) error {
	install := !raft.IsEmptySnap(snap)
	if !install && len(ents) == 0 && !mustSync {
		if !raft.IsEmptyHardState(hs) {
			ls.hsDirty = true
			return ls.mem.SetHardState(hs)
		}
		return nil
	}
	writeHS := hs
	if raft.IsEmptyHardState(writeHS) && ls.hsDirty {
		writeHS, _, _ = ls.mem.InitialState()
	}
	var maxIndex uint64
	if len(ents) > 0 {
		maxIndex = ents[len(ents)-1].Index
	}
	err := ls.write(func(w *recordWriter) error {
		if install {
			meta := pb.Snapshot{Metadata: snap.Metadata}
			if err := w.addProto(recInstall, &meta.Metadata); err != nil {
				return err
			}
		}
		for i := range ents {
			if err := w.addProto(recEntry, &ents[i]); err != nil {
				return err
			}
		}
		if !raft.IsEmptyHardState(writeHS) {
			return w.addProto(recHardState, &writeHS)
		}
		return nil
	}, maxIndex)
	if err != nil {
		return err
	}
	if !raft.IsEmptyHardState(writeHS) {
		ls.hsDirty = false
	}
	if install {
		if err := ls.mem.ApplySnapshot(pb.Snapshot{Metadata: snap.Metadata}); err != nil {
			return err
		}
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
// of that index), drops the log up to keepFrom-1 from memory and deletes
// the segment files whose entries all lie before keepFrom. The state
// database must already be durable up to index.
func (ls *logStore) compact(index uint64, cs pb.ConfState, keepFrom uint64) error {
	snap, _ := ls.mem.Snapshot()
	if index <= snap.Metadata.Index {
		return nil
	}
	term, err := ls.mem.Term(index)
	if err != nil {
		return err
	}
	meta := pb.SnapshotMetadata{ConfState: cs, Index: index, Term: term}
	hs, _, _ := ls.mem.InitialState()
	dirty := ls.hsDirty
	err = ls.write(func(w *recordWriter) error {
		if err := w.addProto(recSnapshot, &meta); err != nil {
			return err
		}
		if dirty { // so that the commit index on disk is not behind the snapshot
			return w.addProto(recHardState, &hs)
		}
		return nil
	}, 0)
	if err != nil {
		return err
	}
	if dirty {
		ls.hsDirty = false
	}
	if _, err := ls.mem.CreateSnapshot(index, &cs, nil); err != nil {
		return err
	}
	if first, _ := ls.mem.FirstIndex(); keepFrom > first {
		if err := ls.mem.Compact(keepFrom - 1); err != nil {
			return err
		}
	}
	ls.dropSegments(keepFrom)
	return nil
}

// dropSegments deletes the oldest segment files while every entry they
// hold lies before keepFrom (the active one stays), keeping one as the
// spare (segrecycle.go). Each removal is made durable before the next, so
// that the files left are always a run of consecutive segments. A failure
// is logged; the next compaction tries again.
func (ls *logStore) dropSegments(keepFrom uint64) {
	for len(ls.segs) > 1 && ls.segs[0] != ls.act.seg && ls.segs[0].maxIndex < keepFrom {
		s := ls.segs[0]
		if err := ls.retire(s); err != nil {
			ls.log.Warn("cannot remove a compacted raft log segment; the next compaction retries", zap.String("file", s.path), zap.Error(err))
			return
		}
		ls.segs = ls.segs[1:]
		if err := ls.fs.SyncDir(ls.dir); err != nil {
			ls.log.Warn("cannot sync the raft log directory after removing a segment; the next compaction retries", zap.String("dir", ls.dir), zap.Error(err))
			return
		}
	}
}

// fsyncLatency is the histogram of the log's fdatasyncs; ok is false once
// closed.
func (ls *logStore) fsyncLatency() (*dto.Histogram, bool) {
	if ls.closed.Load() {
		return nil, false
	}
	return histogramOf(ls.fsyncs)
}

// close writes a HardState still pending (best effort) and closes the
// active segment.
func (ls *logStore) close() error {
	if ls.closed.Swap(true) {
		return nil
	}
	if ls.hsDirty && !ls.act.failed {
		hs, _, _ := ls.mem.InitialState()
		_ = ls.write(func(w *recordWriter) error { return w.addProto(recHardState, &hs) }, 0)
	}
	return ls.act.f.Close()
}

// unavailable wraps a disk fault so that the node retries (Node.retry).
func (ls *logStore) unavailable(what string, err error) error {
	return fmt.Errorf("raftstore: raft log: %s: %w: %w", what, storage.ErrUnavailable, err)
}

// corrupt reports damage at off of path.
func corrupt(path string, off int64, format string, args ...any) error {
	return fmt.Errorf("raftstore: raft log %s: %w at offset %d: %s", path, storage.ErrCorrupt, off, fmt.Sprintf(format, args...))
}
