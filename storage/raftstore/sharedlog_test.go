package raftstore

import (
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// The shared log's own tests: several groups' logs in one set of
// segment files, on real files.

func openShared(t *testing.T, dir string, o logOptions) *logStore {
	t.Helper()
	if o.log == nil {
		o.log = zaptest.NewLogger(t)
	}
	ls, err := openSharedLog(dir, 1, o)
	if err != nil {
		t.Fatalf("open the shared log: %v", err)
	}
	t.Cleanup(func() { ls.closeFiles() })
	return ls
}

func mustClaim(t *testing.T, ls *logStore, tag uint64, wantFresh bool) *groupLog {
	t.Helper()
	g, fresh, err := ls.claim(tag)
	if err != nil {
		t.Fatalf("claim group %d: %v", tag, err)
	}
	if fresh != wantFresh {
		t.Fatalf("group %d: fresh %v, want %v", tag, fresh, wantFresh)
	}
	return g
}

func mustSaveGroup(t *testing.T, g *groupLog, hs pb.HardState, ents []pb.Entry) {
	t.Helper()
	if err := g.save(hs, ents, pb.Snapshot{}, true); err != nil {
		t.Errorf("group %d: save: %v", g.tag, err)
	}
}

// wantGroupEntries checks group g's log holds exactly want after its
// snapshot.
func wantGroupEntries(t *testing.T, g *groupLog, want []pb.Entry) {
	t.Helper()
	first, _ := g.mem.FirstIndex()
	last, _ := g.mem.LastIndex()
	var got []pb.Entry
	if last >= first {
		var err error
		if got, err = g.mem.Entries(first, last+1, math.MaxUint64); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("group %d holds %d entries (%v), want %d (%v)", g.tag, len(got), span(got), len(want), span(want))
	}
	for i := range got {
		if got[i].Index != want[i].Index || got[i].Term != want[i].Term || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("group %d, entry %d: got %d/%d %q, want %d/%d %q", g.tag, i, got[i].Index, got[i].Term,
				got[i].Data, want[i].Index, want[i].Term, want[i].Data)
		}
	}
}

// Three groups write at once; each reads back its own entries, HardState
// and snapshot, none of another's, and a group the log never held is
// fresh.
func TestSharedLogKeepsGroupsApart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), sharedLogDir)
	ls := openShared(t, dir, logOptions{segmentBytes: 2 << 10})
	var wg sync.WaitGroup
	for tag := uint64(1); tag <= 3; tag++ {
		g := mustClaim(t, ls, tag, true)
		wg.Go(func() {
			for i := uint64(1); i <= 60; i += 3 {
				mustSaveGroup(t, g, pb.HardState{Term: tag, Vote: tag, Commit: i}, testEntries(i, i+2, tag))
			}
			if tag == 2 {
				if err := g.compact(30, pb.ConfState{Voters: []uint64{1, 2, 3}}, 20); err != nil {
					t.Errorf("compact: %v", err)
				}
			}
		})
	}
	wg.Wait()
	ls.closeFiles()

	ls = openShared(t, dir, logOptions{segmentBytes: 2 << 10})
	for tag := uint64(1); tag <= 3; tag++ {
		g := mustClaim(t, ls, tag, false)
		from := uint64(1)
		if tag == 2 {
			from = 31
			if snap, _ := g.mem.Snapshot(); snap.Metadata.Index != 30 || len(snap.Metadata.ConfState.Voters) != 3 {
				t.Fatalf("group 2's snapshot after reopen: %+v", snap.Metadata)
			}
		}
		wantGroupEntries(t, g, testEntries(from, 60, tag))
		if hs, _, _ := g.mem.InitialState(); hs.Term != tag || hs.Vote != tag || hs.Commit != 58 {
			t.Fatalf("group %d's hard state after reopen: %+v", tag, hs)
		}
	}
	mustClaim(t, ls, 4, true)
	if len(segFiles(t, dir)) < 2 {
		t.Fatalf("the writes fit one segment (%v): the test does not cross a segment's opening", segFiles(t, dir))
	}
}

// Writes that queue while another group's fdatasync runs go out together
// in the next write: three groups, two fdatasyncs.
func TestSharedLogCommitsGroupsTogether(t *testing.T) {
	fs := &faultLogFS{}
	ls := openShared(t, filepath.Join(t.TempDir(), sharedLogDir), logOptions{fs: fs})
	gs := []*groupLog{mustClaim(t, ls, 1, true), mustClaim(t, ls, 2, true), mustClaim(t, ls, 3, true)}
	fs.mu.Lock()
	before := fs.okSyncs
	fs.mu.Unlock()
	fs.freeze()
	var wg sync.WaitGroup
	wg.Go(func() { mustSaveGroup(t, gs[0], pb.HardState{Term: 1}, testEntries(1, 1, 1)) })
	for frozen, stuck := fs.holding(); stuck == 0; frozen, stuck = fs.holding() {
		if !frozen {
			t.Fatal("thawed")
		}
		runtime.Gosched()
	}
	for _, g := range gs[1:] {
		wg.Go(func() { mustSaveGroup(t, g, pb.HardState{Term: 1}, testEntries(1, 1, 1)) })
	}
	for queued := 0; queued < 2; {
		ls.mu.Lock()
		queued = len(ls.queue)
		ls.mu.Unlock()
		runtime.Gosched()
	}
	fs.thaw()
	wg.Wait()
	fs.mu.Lock()
	syncs := fs.okSyncs - before
	fs.mu.Unlock()
	if syncs != 2 {
		t.Fatalf("three groups' writes took %d fdatasyncs, want 2 (the two that queued together)", syncs)
	}
	for _, g := range gs {
		wantGroupEntries(t, g, testEntries(1, 1, 1))
	}
}

// A segment goes once every group has compacted past its entries in it;
// a group that writes little and never compacts does not hold the log:
// its entries move to the newest segment and the old ones go. A group
// whose log is large (a follower behind) holds it until it compacts or
// leaves; and one that left reads back as never there.
func TestSharedLogSegmentsWaitForEveryGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), sharedLogDir)
	o := logOptions{segmentBytes: 8 << 10}
	ls := openShared(t, dir, o)
	busy, idle, big := mustClaim(t, ls, 1, true), mustClaim(t, ls, 2, true), mustClaim(t, ls, 3, true)
	mustSaveGroup(t, idle, pb.HardState{Term: 1, Vote: 2}, testEntries(1, 2, 1))
	for i := uint64(1); i <= 400; i += 10 {
		mustSaveGroup(t, busy, pb.HardState{Term: 1, Commit: i}, testEntries(i, i+9, 1))
	}
	if err := busy.compact(400, pb.ConfState{Voters: []uint64{1}}, 401); err != nil {
		t.Fatal(err)
	}
	if segs := segFiles(t, dir); len(segs) > relocateAfter+1 || slices.Contains(segs, segName(1)) {
		t.Fatalf("segments %v: the idle group's two entries hold the log", segs)
	}

	// A group with more than an eighth of a segment in its log holds it.
	mustSaveGroup(t, big, pb.HardState{Term: 1}, bigEntries(1, 4, 1, 512))
	held := segFiles(t, dir)[len(segFiles(t, dir))-1] // the active segment
	for i := uint64(401); i <= 800; i += 10 {
		mustSaveGroup(t, busy, pb.HardState{Term: 1, Commit: i}, testEntries(i, i+9, 1))
	}
	if err := busy.compact(800, pb.ConfState{Voters: []uint64{1}}, 801); err != nil {
		t.Fatal(err)
	}
	if segs := segFiles(t, dir); segs[0] != held || len(segs) <= relocateAfter+1 {
		t.Fatalf("segments %v: the big group's log no longer holds %s", segs, held)
	}
	// While it holds it, writes that open no segment and compact nothing
	// do not size the groups' logs again.
	looks, segs := ls.relocateLooks, segFiles(t, dir)
	for i := uint64(801); i <= 803; i++ {
		mustSaveGroup(t, busy, pb.HardState{Term: 1, Commit: 800}, testEntries(i, i, 1))
	}
	if after := segFiles(t, dir); after[len(after)-1] == segs[len(segs)-1] && ls.relocateLooks != looks {
		t.Fatalf("three writes in one segment looked at the groups' logs %d times", ls.relocateLooks-looks)
	}
	if err := big.forget(); err != nil {
		t.Fatal(err)
	}
	if segs := segFiles(t, dir); len(segs) > relocateAfter+1 || segs[0] == held {
		t.Fatalf("segments %v after the big group left", segs)
	}
	ls.closeFiles()

	ls = openShared(t, dir, o)
	mustClaim(t, ls, 3, true)
	g := mustClaim(t, ls, 1, false)
	if snap, _ := g.mem.Snapshot(); snap.Metadata.Index != 800 {
		t.Fatalf("group 1's snapshot after reopen: %+v", snap.Metadata)
	}
	g = mustClaim(t, ls, 2, false)
	wantGroupEntries(t, g, testEntries(1, 2, 1))
	if hs, _, _ := g.mem.InitialState(); hs.Term != 1 || hs.Vote != 2 {
		t.Fatalf("group 2's hard state after reopen: %+v", hs)
	}
}

// bigEntries makes entries from..to of term, each of size bytes.
func bigEntries(from, to, term uint64, size int) []pb.Entry {
	ents := testEntries(from, to, term)
	for i := range ents {
		ents[i].Data = append(ents[i].Data, make([]byte, size)...)
	}
	return ents
}

// A group the log holds that no group of the node claims at start is
// dropped: its segments go, and it reads back as never there.
func TestSharedLogDropsUnclaimed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), sharedLogDir)
	ls := openShared(t, dir, logOptions{})
	mustSaveGroup(t, mustClaim(t, ls, 5, true), pb.HardState{Term: 3, Vote: 1}, testEntries(1, 4, 3))
	mustSaveGroup(t, mustClaim(t, ls, 6, true), pb.HardState{Term: 2, Vote: 2}, testEntries(1, 2, 2))
	ls.closeFiles()

	ls = openShared(t, dir, logOptions{})
	mustClaim(t, ls, 6, false)
	if err := ls.dropUnclaimed(); err != nil {
		t.Fatal(err)
	}
	ls.closeFiles()
	ls = openShared(t, dir, logOptions{})
	mustClaim(t, ls, 5, true)
	g6 := mustClaim(t, ls, 6, false)
	wantGroupEntries(t, g6, testEntries(1, 2, 2))
}
