package raftstore

import (
	"path/filepath"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// create starts a new log: segment 1 with its opening records, durable.
func (ls *logStore) create() error {
	ls.segs = ls.segs[:0]
	if err := ls.startSegment(1, 0); err != nil {
		return err
	}
	return ls.write(nil, nil)
}

// startSegment makes segment seq the one written: the spare (a segment
// compaction freed) renamed, or else a file created and preallocated; its header (saying the previous segment's trusted records end
// at prevEnd), the snapshot metadata and the HardState go first with the
// next write, so that older segments can be deleted whole.
func (ls *logStore) startSegment(seq uint64, prevEnd int64) error {
	path := filepath.Join(ls.dir, segName(seq))
	f, size := ls.takeSpare(path)
	recycled := f != nil
	if f == nil {
		var err error
		if f, err = ls.fs.Create(path); err != nil {
			return ls.unavailable("creating "+path, err)
		}
		if err := f.Allocate(ls.segBytes); err != nil {
			f.Close()
			_ = ls.fs.Remove(path)
			return ls.unavailable("preallocating "+path, err)
		}
		size = ls.segBytes
	}
	if ls.act != nil {
		ls.act.f.Close()
	}
	s := &segment{seq: seq, path: path, maxIndex: map[uint64]uint64{}}
	ls.segs = append(ls.segs, s)
	ls.relocateDue = true
	ls.act = &activeSegment{seg: s, f: f, alloc: size, prevEnd: prevEnd, recycled: recycled}
	return nil
}

// write writes the records fill adds (nil: none) with one write and one
// fdatasync, starting a new segment first when the active one is full or
// failed (its opening records say where each group stands). batch are the
// writes the records are of, which say the highest entry index of each
// group among them.
func (ls *logStore) write(fill func(w *recordWriter) error, batch []*logWrite) error {
	w := &ls.w
	w.id = ls.id
	defer func() {
		w.reset(0, 0, 0)         // keep no entry's Data alive
		if cap(w.buf) > 16<<20 { // keep the buffer, unless a huge batch grew it
			w.buf = nil
		}
		clear(ls.pieces)
	}()
	for rotated := false; ; rotated = true {
		a := ls.act
		if a.failed {
			if a.synced == 0 {
				a.off, a.writes = 0, 0 // not even its start is durable: write it again
			} else if err := ls.startSegment(a.seg.seq+1, a.synced); err != nil {
				return err
			}
			a = ls.act
		}
		w.reset(a.seg.seq, a.off, a.synced)
		if a.off == 0 {
			if err := ls.opening(w, a.prevEnd); err != nil {
				return err
			}
		}
		if fill != nil {
			if err := fill(w); err != nil {
				return err
			}
		}
		if !rotated && a.writes > 0 && a.off+int64(w.size()) > ls.segBytes {
			if err := ls.startSegment(a.seg.seq+1, a.off); err != nil {
				return err
			}
			continue
		}
		break
	}
	a := ls.act
	end := a.off + int64(w.size())
	if end > a.alloc {
		if err := a.f.Allocate(end); err != nil {
			return ls.unavailable("preallocating "+a.seg.path, err)
		}
		a.alloc = end
	}
	ls.pieces = w.pieces(ls.pieces[:0])
	if _, err := a.f.WritevAt(ls.pieces, a.off); err != nil {
		a.failed = true
		return ls.unavailable("writing "+a.seg.path, err)
	}
	start := time.Now()
	if err := a.f.Datasync(); err != nil {
		a.failed = true
		return ls.unavailable("fdatasync of "+a.seg.path, err)
	}
	ls.fsyncs.Observe(float64(time.Since(start)))
	if !a.dirSynced {
		if err := ls.fs.SyncDir(ls.dir); err != nil {
			a.failed = true
			return ls.unavailable("syncing "+ls.dir, err)
		}
		a.dirSynced = true
	}
	a.off, a.synced, a.failed = end, end, false
	if fill != nil {
		a.writes++
	}
	for _, lw := range batch {
		if lw.maxIndex > 0 {
			a.seg.maxIndex[lw.g.tag] = max(a.seg.maxIndex[lw.g.tag], lw.maxIndex)
		}
	}
	return nil
}

// opening adds a segment's first records: its header, then the snapshot
// metadata and the HardState the log holds for each group, so that older
// segments can be deleted whole.
func (ls *logStore) opening(w *recordWriter, prevEnd int64) error {
	h := segHeader{id: ls.id, seq: w.seq, prevEnd: prevEnd, recycled: ls.act.recycled}
	w.tag = 0
	if err := w.add(recSegment, segHeaderSize, h.fill); err != nil {
		return err
	}
	for _, g := range ls.liveGroups() {
		w.tag = g.tag
		if err := g.addState(w, g.snap, g.hs); err != nil {
			return err
		}
	}
	w.tag = 0
	return nil
}

// addState adds the group's snapshot metadata and HardState (each unless
// empty) as records of w's group.
func (g *groupLog) addState(w *recordWriter, snap pb.SnapshotMetadata, hs pb.HardState) error {
	if snap.Index > 0 {
		if err := w.addProto(recSnapshot, &snap); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		return w.addProto(recHardState, &hs)
	}
	return nil
}
