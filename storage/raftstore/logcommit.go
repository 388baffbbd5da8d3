package raftstore

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// logWrite is one group's write to a logStore.
type logWrite struct {
	g        *groupLog
	fill     func(w *recordWriter) error // adds its records (nil: none)
	maxIndex uint64                      // the highest entry index among them (0: none)
	// What the log holds durably for g once written (nil: unchanged).
	hs   *pb.HardState
	snap *pb.SnapshotMetadata
	// keepFrom: a compaction; the first entry g still needs (0: none).
	keepFrom uint64
	// drop: g leaves the log.
	drop bool
	// apply mirrors the write in g's memory storage once it is durable;
	// the writer runs it, so that what a group's memory holds is what the
	// log holds whenever a writer starts (relocate reads it).
	apply func() error

	done bool
	err  error
}

// commit writes lw, with one write and one fdatasync, together with
// whatever other groups queued while the last write ran (group commit:
// the groups of a shared log fsync as often as one group would). The
// caller that finds no write running writes everything queued; the
// others wait for it, and one of those still queued then writes next.
func (ls *logStore) commit(lw *logWrite) error {
	ls.mu.Lock()
	ls.queue = append(ls.queue, lw)
	for ls.writing && !lw.done {
		ls.cond.Wait()
	}
	if lw.done {
		ls.mu.Unlock()
		return lw.err
	}
	if ls.closed.Load() {
		ls.queue = slices.DeleteFunc(ls.queue, func(q *logWrite) bool { return q == lw })
		ls.mu.Unlock()
		return fmt.Errorf("raftstore: raft log %s: %w", ls.dir, storage.ErrClosed)
	}
	ls.writing = true
	if ls.solo == nil {
		// Let the other groups' appenders that are ready to run queue
		// their writes first: under a CPU budget of less than a core the
		// broker runs on one thread, where none of them runs while this
		// one writes and fsyncs, so without it each would write alone.
		ls.mu.Unlock()
		runtime.Gosched()
		ls.mu.Lock()
	}
	batch := ls.queue
	ls.queue = nil
	ls.mu.Unlock()

	err := ls.writeBatch(batch)
	if err == nil {
		ls.relocate()
	}

	ls.mu.Lock()
	for _, q := range batch {
		q.done = true
		if err != nil {
			q.err = err
		}
		if err == nil && q.drop {
			delete(ls.groups, q.g.tag)
		}
	}
	ls.writing = false
	ls.cond.Broadcast()
	ls.mu.Unlock()
	return lw.err
}

// liveGroups lists the groups the log holds, by tag: whose state opens a
// new segment.
func (ls *logStore) liveGroups() []*groupLog {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	live := make([]*groupLog, 0, len(ls.groups))
	for _, g := range ls.groups {
		live = append(live, g)
	}
	slices.SortFunc(live, func(a, b *groupLog) int { return cmp.Compare(a.tag, b.tag) })
	return live
}

// writeBatch writes the batch's records, each tagged with its group, then
// takes note of what each made durable, and lets segments go that every
// group has compacted past.
func (ls *logStore) writeBatch(batch []*logWrite) error {
	if err := ls.write(fillAll(batch), batch); err != nil {
		return err
	}
	compacted := false
	for _, lw := range batch {
		g := lw.g
		if lw.apply != nil {
			lw.err = lw.apply()
		}
		if lw.hs != nil {
			g.hs = *lw.hs
		}
		if lw.snap != nil {
			g.snap = *lw.snap
		}
		if lw.keepFrom > ls.keepFrom[g.tag] {
			ls.keepFrom[g.tag] = lw.keepFrom
			compacted = true
		}
		if lw.drop {
			for _, s := range ls.segs {
				delete(s.maxIndex, g.tag)
			}
			delete(ls.keepFrom, g.tag)
			g.hs, g.snap = pb.HardState{}, pb.SnapshotMetadata{}
			compacted = true
		}
	}
	if compacted {
		ls.relocateDue = true
		ls.dropSegments()
	}
	return nil
}

// fillAll adds the records of every write of batch, each tagged with its
// group.
func fillAll(batch []*logWrite) func(w *recordWriter) error {
	return func(w *recordWriter) error {
		for _, lw := range batch {
			if lw.fill == nil {
				continue
			}
			w.tag = lw.g.tag
			if err := lw.fill(w); err != nil {
				return err
			}
		}
		w.tag = 0
		return nil
	}
}
