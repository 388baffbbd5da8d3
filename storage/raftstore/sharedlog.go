package raftstore

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// The log a node's data groups share (DESIGN.md, "One log for a node's data groups").
// Every group's appender writes its own log and fdatasyncs it, so a node
// with three groups made about three times the fsyncs of a node with one,
// a cost that fell on the followers' side of the cluster's scaling. In a
// shared log each record names its group (segrecord.go), a write carries
// whatever every group queued while the last one ran (logStore.commit),
// and a segment goes once every group has compacted past its entries in
// it. The meta group keeps a log of its own (it must open first, and a
// one-group cluster has nothing to share), as does a data group whose
// directory holds its own log from an earlier build, or whose number
// does not fit a record's three bytes.

// sharedLogDir is the shared log's directory in the node's.
const sharedLogDir = "grouplog"

// ownLogDir is a group's own log in its directory.
const ownLogDir = "raftlog"

// openSharedLog opens the shared log in dir; its groups wait for claim.
func openSharedLog(dir string, id uint64, o logOptions) (*logStore, error) {
	ls, _, err := openSegments(dir, id, o, true)
	return ls, err
}

// claim gives group tag its log in the shared log: the one loaded from
// disk, or a new one (fresh, unless --repair cut the log: the group's
// records may be what it lost).
func (ls *logStore) claim(tag uint64) (g *groupLog, fresh bool, err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if g = ls.groups[tag]; g != nil {
		if g.claimed {
			return nil, false, fmt.Errorf("raftstore: group %d's log is open already", tag)
		}
		g.claimed = true
		g.closed.Store(false)
		return g, false, nil
	}
	g = ls.newGroup(tag)
	g.claimed = true
	return g, !ls.repaired, nil
}

// forget drops the group from the shared log for good (it left the node):
// a record says so, and the segments stop waiting for its compaction.
func (g *groupLog) forget() error {
	g.closed.Store(true)
	return g.ls.commit(&logWrite{g: g, drop: true, fill: func(w *recordWriter) error {
		return w.add(recDrop, 0, func([]byte) error { return nil })
	}})
}

// dropUnclaimed forgets the groups the log holds that no group of the
// node claimed: they left the node while it was down, or before their
// drop was written.
func (ls *logStore) dropUnclaimed() error {
	ls.mu.Lock()
	var left []*groupLog
	for _, g := range ls.groups {
		if !g.claimed {
			left = append(left, g)
		}
	}
	ls.mu.Unlock()
	var errs []error
	for _, g := range left {
		if err := g.forget(); err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", g.tag, err))
		}
	}
	return errors.Join(errs...)
}

// name says which group, in messages about a shared log.
func (g *groupLog) name() string {
	if !g.shared() {
		return ""
	}
	return "group " + strconv.FormatUint(g.tag, 10) + ": "
}

// shared: the log holds other groups' records too.
func (g *groupLog) shared() bool { return g.ls.solo == nil }

// discard gives up a log that holds nothing of the group yet (a start
// refused before the group did anything): a group's own directory goes,
// a shared log forgets the group.
func (g *groupLog) discard() {
	if g.shared() {
		_ = g.forget()
		g.release()
		return
	}
	g.close()
	_ = os.RemoveAll(g.ls.dir)
}

// release lets a closed group's log be claimed again.
func (g *groupLog) release() {
	g.ls.mu.Lock()
	g.claimed = false
	g.ls.mu.Unlock()
}

// openGroupLog opens group g's log: the meta group's own, a data group's
// own when its directory holds one (an earlier build's) or its number
// does not fit a record, else its part of the node's shared log, which
// opens with the first.
func (h *host) openGroupLog(cfg Config, g uint64, o logOptions) (*groupLog, bool, error) {
	own := filepath.Join(cfg.Dir, ownLogDir)
	if _, err := os.Stat(own); g == 0 || g > maxTag || err == nil {
		ls, fresh, err := openLogStore(own, cfg.ID, o)
		if err != nil {
			return nil, false, err
		}
		return ls.solo, fresh, nil
	}
	h.logMu.Lock()
	if h.groupLogs == nil {
		o.log = h.cfg.Logger.Named("grouplog")
		ls, err := openSharedLog(filepath.Join(h.cfg.Dir, sharedLogDir), h.cfg.ID, o)
		if err != nil {
			h.logMu.Unlock()
			return nil, false, err
		}
		h.groupLogs = ls
	}
	ls := h.groupLogs
	h.logMu.Unlock()
	return ls.claim(g)
}

// closeGroupLogs closes the shared log once its groups are closed.
func (h *host) closeGroupLogs() error {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	if h.groupLogs == nil {
		return nil
	}
	return h.groupLogs.closeFiles()
}

// dropUnclaimedLogs forgets, once a start has opened its groups, those of
// the shared log that none claimed.
func (h *host) dropUnclaimedLogs() error {
	h.logMu.Lock()
	ls := h.groupLogs
	h.logMu.Unlock()
	if ls == nil {
		return nil
	}
	return ls.dropUnclaimed()
}

// relocateAfter: a shared log of more segments than this moves the small
// logs of the groups that hold its oldest segment to its newest.
const relocateAfter = 2

// relocate lets the oldest segment of a shared log go when groups whose
// own logs are small hold it: a group that writes little compacts rarely
// (SnapshotEntries entries after its last compaction) and would otherwise
// keep every segment from its oldest entry on, whatever the others wrote
// since. Each such group's snapshot metadata, entries and HardState, as
// its memory holds them (which is what the log holds: the writer mirrors
// every write in memory before the next one starts), are written again in
// the active segment, and the older segments stop waiting for it. A group
// whose log is larger than an eighth of a segment (a follower behind, kept
// in the catch-up margin) is left to its compaction, as in a log of its
// own. It looks only when a segment opened or a group compacted or left
// since it last did (relocateDue): sizing every group's log after each
// write cost a busy node 2 % of its CPU. Only the writer calls it; a
// failed write is logged, changes nothing, and the next write tries again.
func (ls *logStore) relocate() {
	if ls.solo != nil || !ls.relocateDue {
		return
	}
	ls.relocateDue = false
	if len(ls.segs) <= relocateAfter || ls.segs[0] == ls.act.seg || ls.freed(ls.segs[0]) {
		return
	}
	ls.relocateLooks++
	oldest := ls.segs[0]
	var batch []*logWrite
	for _, g := range ls.liveGroups() {
		if last, ok := oldest.maxIndex[g.tag]; !ok || last < ls.keepFrom[g.tag] {
			continue
		}
		first, _ := g.mem.FirstIndex()
		last, _ := g.mem.LastIndex()
		var ents []pb.Entry
		if last >= first {
			var err error
			if ents, err = g.mem.Entries(first, last+1, math.MaxUint64); err != nil {
				continue
			}
		}
		var bytes int64
		for i := range ents {
			bytes += int64(ents[i].Size())
		}
		if bytes > ls.segBytes/8 {
			continue
		}
		lw := &logWrite{g: g}
		if len(ents) > 0 {
			lw.maxIndex = ents[len(ents)-1].Index
		}
		snap, hs := g.snap, g.hs
		lw.fill = func(w *recordWriter) error {
			if err := g.addState(w, snap, hs); err != nil {
				return err
			}
			for i := range ents {
				if err := w.addEntry(&ents[i]); err != nil {
					return err
				}
			}
			return nil
		}
		batch = append(batch, lw)
	}
	if len(batch) == 0 {
		return
	}
	if err := ls.write(fillAll(batch), batch); err != nil {
		ls.log.Warn("cannot move small groups' logs out of the shared log's oldest segment; the next write tries again", zap.Error(err))
		ls.relocateDue = true
		return
	}
	for _, s := range ls.segs {
		if s != ls.act.seg {
			for _, lw := range batch {
				delete(s.maxIndex, lw.g.tag)
			}
		}
	}
	ls.dropSegments()
}
