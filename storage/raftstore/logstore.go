package raftstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// logStore keeps Raft logs, HardStates and snapshot metadata in
// append-only segment files (segrecord.go has the format, DESIGN.md the
// why). It holds either one group's log (the meta group's, or a data
// group's kept from an earlier build: solo) or the log every data group
// of a node shares (sharedlog.go), each group's records tagged with it.
// Each group's log is mirrored in its groupLog's raft.MemoryStorage, which
// raft reads (the log is kept short by compaction, so it fits in memory).
// Writes go through commit, which makes whatever the groups queued while
// the last write ran one write and one fdatasync; the segment files and
// what the log holds of each group are the current writer's alone. The
// fsync histogram is read by anyone.
type logStore struct {
	dir      string
	id       uint64
	fs       logFS
	log      *zap.Logger
	segBytes int64

	// solo is the one group of a log of one group (nil: shared).
	solo *groupLog

	// mu guards groups, queue and writing.
	mu   sync.Mutex
	cond *sync.Cond
	// groups are the groups whose records the log holds, by tag.
	groups  map[uint64]*groupLog
	queue   []*logWrite
	writing bool // a caller of commit is writing; the others wait
	// repaired: --repair cut the log at load, so a group it holds no
	// record of is not fresh (it may have lost them).
	repaired bool

	// The writer's (the caller of commit that writes):
	// segs are the segment files, oldest first; the last is act's.
	segs   []*segment
	act    *activeSegment
	buf    []byte       // a segment read back (load)
	w      recordWriter // reused for each write
	pieces [][]byte     // the write's buffers, reused
	// keepFrom is, by group, the first entry it still needs: a segment
	// goes once every group's entries in it lie before that (a group
	// loaded but not yet compacted needs them all).
	keepFrom map[uint64]uint64
	// hasSpare: spare.tmp is a segment file compaction freed, to be
	// written over as the next segment (segrecycle.go).
	hasSpare bool
	// relocateDue: since relocate last looked, a segment opened or a
	// group compacted or left, so what it would find may have changed.
	relocateDue bool
	// relocateLooks counts relocate's looks at the groups' logs.
	relocateLooks int

	fsyncs prometheus.Histogram // of the fdatasyncs (seghist.go)
	closed atomic.Bool
}

// groupLog is one group's log in a logStore. Only the group's appender
// calls its methods (Open and Close aside); its memory storage is safe for
// all.
type groupLog struct {
	ls  *logStore
	tag uint64 // its records' group in a shared log; 0 in a solo one
	mem *raft.MemoryStorage
	// hsDirty: the HardState in mem moved (its commit index only) since
	// it was last written; it goes with the next write.
	hsDirty bool
	// The writer's: the HardState and snapshot metadata the log holds
	// durably for the group, which open every new segment.
	hs   pb.HardState
	snap pb.SnapshotMetadata
	// claimed: a group of the node took this log (a shared log's groups
	// loaded from disk wait to be claimed; the others are dropped).
	claimed bool
	closed  atomic.Bool
}

// segment is one segment file.
type segment struct {
	seq  uint64
	path string
	// maxIndex is, by group tag, the highest entry index written in it.
	// Once every group has compacted its log past its entries, the file
	// goes whole.
	maxIndex map[uint64]uint64
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

// openLogStore opens the log of one group in dir (creating it) and loads
// it into memory. It returns fresh = true for a new log.
func openLogStore(dir string, id uint64, o logOptions) (ls *logStore, fresh bool, err error) {
	return openSegments(dir, id, o, false)
}

// openSegments opens the segment files in dir (creating them) and loads
// them: into the one group's memory storage, or, shared, into a groupLog
// for each group found, to be claimed.
func openSegments(dir string, id uint64, o logOptions, shared bool) (ls *logStore, fresh bool, err error) {
	if o.fs == nil {
		o.fs = osLogFS{}
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.segmentBytes <= 0 {
		o.segmentBytes = DefaultSegmentBytes
	}
	ls = &logStore{dir: dir, id: id, fs: o.fs, log: o.log, segBytes: o.segmentBytes,
		groups: map[uint64]*groupLog{}, keepFrom: map[uint64]uint64{}, fsyncs: newFsyncHist()}
	ls.cond = sync.NewCond(&ls.mu)
	if !shared {
		ls.solo = ls.newGroup(0)
		ls.solo.claimed = true
	}
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

// newGroup is a group's log, not yet registered.
func (ls *logStore) newGroup(tag uint64) *groupLog {
	g := &groupLog{ls: ls, tag: tag, mem: raft.NewMemoryStorage()}
	ls.groups[tag] = g
	return g
}

// save makes a Ready's entries, HardState and snapshot durable, in one
// write and one fdatasync, then mirrors them in memory. The snapshot's
// data must already be installed in the state database. A HardState that
// only moves the commit index (mustSync false, no entries) is not written
// at once: Raft does not need it durable (it learns the commit index
// again); it goes with the next write.
func (g *groupLog) save(hs pb.HardState, ents []pb.Entry, snap pb.Snapshot, mustSync bool) error {
	install := !raft.IsEmptySnap(snap)
	if !install && len(ents) == 0 && !mustSync {
		if !raft.IsEmptyHardState(hs) {
			g.hsDirty = true
			return g.mem.SetHardState(hs)
		}
		return nil
	}
	writeHS := hs
	if raft.IsEmptyHardState(writeHS) && g.hsDirty {
		writeHS, _, _ = g.mem.InitialState()
	}
	lw := &logWrite{g: g}
	if len(ents) > 0 {
		lw.maxIndex = ents[len(ents)-1].Index
	}
	if install {
		lw.snap = &snap.Metadata
	}
	if !raft.IsEmptyHardState(writeHS) {
		lw.hs = &writeHS
	}
	lw.fill = func(w *recordWriter) error {
		if install {
			if err := w.addProto(recInstall, &snap.Metadata); err != nil {
				return err
			}
		}
		for i := range ents {
			if err := w.addEntry(&ents[i]); err != nil {
				return err
			}
		}
		if lw.hs != nil {
			return w.addProto(recHardState, lw.hs)
		}
		return nil
	}
	lw.apply = func() error {
		if lw.hs != nil {
			g.hsDirty = false
		}
		if install {
			if err := g.mem.ApplySnapshot(pb.Snapshot{Metadata: snap.Metadata}); err != nil {
				return err
			}
		}
		if err := g.mem.Append(ents); err != nil {
			return err
		}
		if !raft.IsEmptyHardState(hs) {
			return g.mem.SetHardState(hs)
		}
		return nil
	}
	return g.ls.commit(lw)
}

// compact records a snapshot at applied index (with cs, the ConfState as
// of that index), drops the log up to keepFrom-1 from memory and lets the
// segment files go whose entries all lie before keepFrom (those of every
// group, in a shared log). The state database must already be durable up
// to index.
func (g *groupLog) compact(index uint64, cs pb.ConfState, keepFrom uint64) error {
	snap, _ := g.mem.Snapshot()
	if index <= snap.Metadata.Index {
		return nil
	}
	term, err := g.mem.Term(index)
	if err != nil {
		return err
	}
	meta := pb.SnapshotMetadata{ConfState: cs, Index: index, Term: term}
	lw := &logWrite{g: g, snap: &meta, keepFrom: keepFrom}
	if g.hsDirty { // so that the commit index on disk is not behind the snapshot
		hs, _, _ := g.mem.InitialState()
		lw.hs = &hs
	}
	lw.fill = func(w *recordWriter) error {
		if err := w.addProto(recSnapshot, &meta); err != nil {
			return err
		}
		if lw.hs != nil {
			return w.addProto(recHardState, lw.hs)
		}
		return nil
	}
	lw.apply = func() error {
		if lw.hs != nil {
			g.hsDirty = false
		}
		if _, err := g.mem.CreateSnapshot(index, &cs, nil); err != nil {
			return err
		}
		if first, _ := g.mem.FirstIndex(); keepFrom > first {
			return g.mem.Compact(keepFrom - 1)
		}
		return nil
	}
	return g.ls.commit(lw)
}

// close writes a HardState still pending (best effort); a solo log's
// active segment is closed with it, a shared one stays open for the other
// groups (host.closeGroupLogs closes it).
func (g *groupLog) close() error {
	if g.closed.Swap(true) {
		return nil
	}
	ls := g.ls
	if g.hsDirty && !ls.closed.Load() && (g.shared() || !ls.act.failed) {
		hs, _, _ := g.mem.InitialState()
		_ = ls.commit(&logWrite{g: g, hs: &hs, fill: func(w *recordWriter) error { return w.addProto(recHardState, &hs) },
			apply: func() error { g.hsDirty = false; return nil }})
	}
	if !g.shared() {
		return ls.closeFiles()
	}
	g.release()
	return nil
}

// fsyncLatency is the histogram of the log's fdatasyncs (in a shared log,
// those of every group); ok is false once closed.
func (g *groupLog) fsyncLatency() (*dto.Histogram, bool) {
	if g.closed.Load() {
		return nil, false
	}
	return histogramOf(g.ls.fsyncs)
}

// The solo group's methods, on its log.
func (ls *logStore) save(hs pb.HardState, ents []pb.Entry, snap pb.Snapshot, mustSync bool) error {
	return ls.solo.save(hs, ents, snap, mustSync)
}

func (ls *logStore) compact(index uint64, cs pb.ConfState, keepFrom uint64) error {
	return ls.solo.compact(index, cs, keepFrom)
}

func (ls *logStore) close() error { return ls.solo.close() }

// dropSegments deletes the oldest segment files while every entry they
// hold lies before its group's keepFrom (the active one stays), keeping
// one as the spare (segrecycle.go). Each removal is made durable before
// the next, so that the files left are always a run of consecutive
// segments. A failure is logged; the next compaction tries again. Only the
// writer calls it.
func (ls *logStore) dropSegments() {
	for len(ls.segs) > 1 && ls.segs[0] != ls.act.seg && ls.freed(ls.segs[0]) {
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

// freed: every group has compacted past its entries in s.
func (ls *logStore) freed(s *segment) bool {
	for tag, last := range s.maxIndex {
		if last >= ls.keepFrom[tag] {
			return false
		}
	}
	return true
}

// closeFiles closes the active segment once the writer is done; later
// writes fail with ErrClosed.
func (ls *logStore) closeFiles() error {
	ls.mu.Lock()
	for ls.writing {
		ls.cond.Wait()
	}
	wasClosed := ls.closed.Swap(true)
	ls.cond.Broadcast()
	ls.mu.Unlock()
	if wasClosed {
		return nil
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
