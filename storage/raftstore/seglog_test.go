package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// The segment log's own tests, on real files. Node-level behaviour (a
// cluster restarting, catching up, failing over) is in the other tests.

func openLog(t *testing.T, dir string, o logOptions) *logStore {
	t.Helper()
	ls, _, err := openLogAs(t, dir, 1, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return ls
}

func openLogAs(t *testing.T, dir string, id uint64, o logOptions) (*logStore, bool, error) {
	t.Helper()
	if o.log == nil {
		o.log = zaptest.NewLogger(t)
	}
	ls, fresh, err := openLogStore(dir, id, o)
	if err == nil {
		t.Cleanup(func() { ls.close() })
	}
	return ls, fresh, err
}

// testEntries makes entries from..to of term, with data naming both.
func testEntries(from, to, term uint64) []pb.Entry {
	var ents []pb.Entry
	for i := from; i <= to; i++ {
		ents = append(ents, pb.Entry{Index: i, Term: term, Data: fmt.Appendf(nil, "entry %d of term %d", i, term)})
	}
	return ents
}

func mustSave(t *testing.T, ls *logStore, hs pb.HardState, ents []pb.Entry) {
	t.Helper()
	if err := ls.save(hs, ents, pb.Snapshot{}, true); err != nil {
		t.Fatalf("save: %v", err)
	}
}

// logEntries returns what the memory storage holds after its snapshot.
func logEntries(t *testing.T, ls *logStore) []pb.Entry {
	t.Helper()
	first, _ := ls.solo.mem.FirstIndex()
	last, _ := ls.solo.mem.LastIndex()
	if last < first {
		return nil
	}
	ents, err := ls.solo.mem.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

// wantEntries checks the log holds exactly want (after its snapshot).
func wantEntries(t *testing.T, ls *logStore, want []pb.Entry) {
	t.Helper()
	got := logEntries(t, ls)
	if len(got) != len(want) {
		t.Fatalf("log holds %d entries (%v), want %d (%v)", len(got), span(got), len(want), span(want))
	}
	for i := range got {
		if got[i].Index != want[i].Index || got[i].Term != want[i].Term || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("entry %d: got %d/%d %q, want %d/%d %q", i, got[i].Index, got[i].Term, got[i].Data,
				want[i].Index, want[i].Term, want[i].Data)
		}
	}
}

func span(ents []pb.Entry) string {
	if len(ents) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d..%d", ents[0].Index, ents[len(ents)-1].Index)
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := readDirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if _, ok := parseSegName(n); ok {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs
}

func TestLogAppendAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	ls, fresh, err := openLogAs(t, dir, 1, logOptions{})
	if err != nil || !fresh {
		t.Fatalf("open a new log: fresh %v, %v", fresh, err)
	}
	hs := pb.HardState{Term: 2, Vote: 1, Commit: 5}
	mustSave(t, ls, hs, testEntries(1, 5, 2))
	mustSave(t, ls, pb.HardState{Term: 2, Vote: 1, Commit: 9}, testEntries(6, 9, 2))
	// A commit-only HardState is kept in memory and written with the
	// next record (or at close).
	if err := ls.save(pb.HardState{Term: 2, Vote: 1, Commit: 9}, nil, pb.Snapshot{}, false); err != nil {
		t.Fatal(err)
	}
	ls.close()

	ls, fresh, err = openLogAs(t, dir, 1, logOptions{})
	if err != nil || fresh {
		t.Fatalf("reopen: fresh %v, %v", fresh, err)
	}
	wantEntries(t, ls, testEntries(1, 9, 2))
	if got, _, _ := ls.solo.mem.InitialState(); got != (pb.HardState{Term: 2, Vote: 1, Commit: 9}) {
		t.Fatalf("hard state after reopen: %+v", got)
	}
	// And it goes on appending in the same segment.
	mustSave(t, ls, pb.HardState{}, testEntries(10, 12, 2))
	ls.close()
	ls = openLog(t, dir, logOptions{})
	wantEntries(t, ls, testEntries(1, 12, 2))
	if segs := segFiles(t, dir); len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
}

// A new leader overwrites our uncommitted tail: the entries it sends
// replace ours from their first index on, in memory and after a reopen.
func TestLogOverwriteTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	ls := openLog(t, dir, logOptions{})
	mustSave(t, ls, pb.HardState{Term: 2, Commit: 3}, testEntries(1, 10, 2))
	mustSave(t, ls, pb.HardState{Term: 3, Commit: 3}, testEntries(6, 7, 3))
	want := append(testEntries(1, 5, 2), testEntries(6, 7, 3)...)
	wantEntries(t, ls, want)
	ls.close()
	ls = openLog(t, dir, logOptions{})
	wantEntries(t, ls, want)
	mustSave(t, ls, pb.HardState{Term: 3, Commit: 8}, testEntries(8, 8, 3))
	ls.close()
	ls = openLog(t, dir, logOptions{})
	wantEntries(t, ls, append(want, testEntries(8, 8, 3)...))
}

// Segments fill up and are deleted whole once compaction passes them;
// the log reopens from the segments left.
func TestLogRotateAndCompact(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	o := logOptions{segmentBytes: 4 << 10}
	ls := openLog(t, dir, o)
	for i := uint64(1); i <= 200; i += 10 {
		mustSave(t, ls, pb.HardState{Term: 1, Commit: i + 9}, testEntries(i, i+9, 1))
	}
	before := segFiles(t, dir)
	if len(before) < 4 {
		t.Fatalf("200 entries in 4 KiB segments made %d segments", len(before))
	}
	cs := pb.ConfState{Voters: []uint64{1, 2, 3}}
	if err := ls.compact(150, cs, 140); err != nil {
		t.Fatal(err)
	}
	after := segFiles(t, dir)
	if len(after) >= len(before) || after[len(after)-1] != before[len(before)-1] {
		t.Fatalf("segments before compaction %v, after %v: want the oldest gone", before, after)
	}
	// Every segment left holds an entry at or after keepFrom, or is
	// after one that does.
	wantEntries(t, ls, testEntries(140, 200, 1))
	ls.close()

	ls = openLog(t, dir, o)
	snap, _ := ls.solo.mem.Snapshot()
	if snap.Metadata.Index != 150 || snap.Metadata.Term != 1 || !slices.Equal(snap.Metadata.ConfState.Voters, cs.Voters) {
		t.Fatalf("snapshot after reopen: %+v", snap.Metadata)
	}
	wantEntries(t, ls, testEntries(151, 200, 1))
	// Compaction again, from a reopened log: it knows which segments
	// hold what.
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 260}, testEntries(201, 260, 1))
	if err := ls.compact(255, cs, 250); err != nil {
		t.Fatal(err)
	}
	ls.close()
	ls = openLog(t, dir, o)
	wantEntries(t, ls, testEntries(256, 260, 1))
	if n := len(segFiles(t, dir)); n > 3 {
		t.Fatalf("%d segments left after compacting to 250 of 260", n)
	}
}

// A snapshot received from the leader voids every entry before it.
func TestLogInstallSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	ls := openLog(t, dir, logOptions{})
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 5}, testEntries(1, 10, 1))
	snap := pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 50, Term: 4, ConfState: pb.ConfState{Voters: []uint64{1, 2}}}}
	if err := ls.save(pb.HardState{Term: 4, Commit: 50}, nil, snap, true); err != nil {
		t.Fatal(err)
	}
	mustSave(t, ls, pb.HardState{Term: 4, Commit: 53}, testEntries(51, 53, 4))
	ls.close()
	ls = openLog(t, dir, logOptions{})
	got, _ := ls.solo.mem.Snapshot()
	if got.Metadata.Index != 50 || got.Metadata.Term != 4 {
		t.Fatalf("snapshot %+v", got.Metadata)
	}
	wantEntries(t, ls, testEntries(51, 53, 4))
}

// lastSegment returns the path of the newest segment.
func lastSegment(t *testing.T, dir string) string {
	segs := segFiles(t, dir)
	return filepath.Join(dir, segs[len(segs)-1])
}

// patch overwrites bytes of a file.
func patch(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A crash in the middle of the last write leaves part of it: the log is
// cut there on open (nothing of it was acknowledged) and goes on in a
// new segment; the cut part is never read again.
func TestLogTornTailIsCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tear  func(t *testing.T, path string, start, end int64)
		fresh bool // the torn write leaves nothing: appending goes on in place
	}{
		{"second half lost", func(t *testing.T, path string, start, end int64) {
			patch(t, path, (start+end)/2, make([]byte, end-(start+end)/2))
		}, false},
		{"first sector lost", func(t *testing.T, path string, start, end int64) {
			patch(t, path, start, make([]byte, min(512, end-start)))
		}, false},
		{"garbage written", func(t *testing.T, path string, start, end int64) {
			patch(t, path, start+4000, []byte("garbage garbage garbage"))
		}, false},
		{"all lost", func(t *testing.T, path string, start, end int64) {
			patch(t, path, start, make([]byte, end-start))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "raftlog")
			ls := openLog(t, dir, logOptions{})
			mustSave(t, ls, pb.HardState{Term: 1, Commit: 10}, testEntries(1, 10, 1))
			// The torn write: one entry of 8 KiB (a write of several
			// records may keep those that made it whole, which is right
			// too, but not what this test looks at).
			start := ls.act.off
			big := pb.Entry{Index: 11, Term: 1, Data: []byte(strings.Repeat("x", 8<<10))}
			mustSave(t, ls, pb.HardState{Term: 1, Commit: 11}, []pb.Entry{big})
			end := ls.act.off
			ls.close()
			tc.tear(t, lastSegment(t, dir), start, end)

			ls = openLog(t, dir, logOptions{})
			wantEntries(t, ls, testEntries(1, 10, 1))
			if hs, _, _ := ls.solo.mem.InitialState(); hs.Commit != 10 {
				t.Fatalf("hard state %+v: want the one before the torn write", hs)
			}
			if n := len(segFiles(t, dir)); (n == 1) != tc.fresh {
				t.Fatalf("%d segments after cutting a torn tail", n)
			}
			mustSave(t, ls, pb.HardState{Term: 2, Commit: 15}, testEntries(11, 15, 2))
			ls.close()
			ls = openLog(t, dir, logOptions{})
			wantEntries(t, ls, append(testEntries(1, 10, 1), testEntries(11, 15, 2)...))
		})
	}
}

// checkRefused opens dir and expects ErrCorrupt naming the file, the
// offset and --repair.
func checkRefused(t *testing.T, dir, file string, off int64) {
	t.Helper()
	_, _, err := openLogAs(t, dir, 1, logOptions{})
	want := fmt.Sprintf("%s: storage: corrupt at offset %d", filepath.Join(dir, file), off)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--repair") {
		t.Fatalf("open = %v\nwant ErrCorrupt with %q and --repair", err, want)
	}
	t.Logf("refused: %v", err)
}

// Damage that is not the end of the log (records written after it had
// been made durable follow) refuses the start, naming file and offset;
// --repair cuts the log there and keeps a copy.
func TestLogDamageInTheLastSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	ls := openLog(t, dir, logOptions{})
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 10}, testEntries(1, 10, 1))
	damaged := ls.act.off
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 20}, testEntries(11, 20, 1))
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 30}, testEntries(21, 30, 1))
	ls.close()
	seg := lastSegment(t, dir)
	patch(t, seg, damaged+recHeaderLen+3, []byte{0xff}) // a payload byte of entry 11

	checkRefused(t, dir, filepath.Base(seg), damaged)
	ls = openLog(t, dir, logOptions{repair: true})
	wantEntries(t, ls, testEntries(1, 10, 1))
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), damagedDir, filepath.Base(seg))); err != nil {
		t.Fatalf("no copy of the damaged segment: %v", err)
	}
	mustSave(t, ls, pb.HardState{Term: 2, Commit: 12}, testEntries(11, 12, 2))
	ls.close()
	// Once repaired, it opens as it is.
	ls = openLog(t, dir, logOptions{})
	wantEntries(t, ls, append(testEntries(1, 10, 1), testEntries(11, 12, 2)...))
}

// Damage in a segment before the last refuses the start too; --repair
// cuts there and sets the later segments aside.
func TestLogDamageInAnEarlierSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	o := logOptions{segmentBytes: 4 << 10}
	ls := openLog(t, dir, o)
	var damaged int64
	for i := uint64(1); i <= 300; i += 10 {
		if i == 11 {
			damaged = ls.act.off
		}
		mustSave(t, ls, pb.HardState{Term: 1, Commit: i + 9}, testEntries(i, i+9, 1))
	}
	ls.close()
	segs := segFiles(t, dir)
	if len(segs) < 3 {
		t.Fatalf("segments %v", segs)
	}
	patch(t, filepath.Join(dir, segs[0]), damaged+5, []byte{0x7f}) // the record's length

	checkRefused(t, dir, segs[0], damaged)
	o.repair = true
	ls = openLog(t, dir, o)
	wantEntries(t, ls, testEntries(1, 10, 1))
	for _, s := range segs[1:] {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), damagedDir, s)); err != nil {
			t.Fatalf("segment %s not set aside: %v", s, err)
		}
	}
	ls.close()
	o.repair = false
	ls = openLog(t, dir, o)
	wantEntries(t, ls, testEntries(1, 10, 1))
}

// A segment whose creation a crash interrupted (nothing of it durable)
// is removed on open; one whose header is damaged while later records
// are durable is refused.
func TestLogUnfinishedSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	o := logOptions{segmentBytes: 4 << 10}
	ls := openLog(t, dir, o)
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 10}, testEntries(1, 10, 1))
	ls.close()
	next := filepath.Join(dir, segName(2))
	if err := os.WriteFile(next, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	ls = openLog(t, dir, o)
	wantEntries(t, ls, testEntries(1, 10, 1))
	if _, err := os.Stat(next); !os.IsNotExist(err) {
		t.Fatalf("the unfinished segment is still there: %v", err)
	}
	for i := uint64(11); i <= 60; i += 10 {
		mustSave(t, ls, pb.HardState{Term: 1, Commit: i + 9}, testEntries(i, i+9, 1))
	}
	ls.close()
	seg := lastSegment(t, dir)
	patch(t, seg, 30, []byte("xx")) // its header's payload
	checkRefused(t, dir, filepath.Base(seg), 0)
}

// Each segment names its node: another node's directory is refused, as
// is a Raft log of an earlier build (a Pebble database).
func TestLogRefusesOtherLogs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	ls := openLog(t, dir, logOptions{})
	mustSave(t, ls, pb.HardState{Term: 1}, testEntries(1, 1, 1))
	ls.close()
	if _, _, err := openLogAs(t, dir, 2, logOptions{}); err == nil || !strings.Contains(err.Error(), "belongs to another node (id 1), not 2") {
		t.Fatalf("open as node 2: %v", err)
	}

	old := filepath.Join(t.TempDir(), "raftlog")
	db, err := pebblestore.Open(old, pebblestore.Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, _, err := openLogAs(t, old, 1, logOptions{}); err == nil || !strings.Contains(err.Error(), "Pebble database") {
		t.Fatalf("open a Pebble raftlog: %v", err)
	}
}

// TestRecordsIgnoreWhatTheReusedBufferHeld: records laid out in a buffer
// full of an earlier write's bytes are the very bytes laid out in a fresh
// one (add clears only the header and the padding: the payload is
// written whole by its fill).
func TestRecordsIgnoreWhatTheReusedBufferHeld(t *testing.T) {
	lay := func(buf []byte) []byte {
		w := &recordWriter{id: 7, seq: 3, base: 4096, synced: 4096, buf: buf}
		h := segHeader{id: 7, seq: 3, prevEnd: 123, recycled: true}
		if err := w.add(recSegment, segHeaderSize, h.fill); err != nil {
			t.Fatal(err)
		}
		ents := testEntries(1, 9, 2)
		ents[3].Data = bytes.Repeat([]byte{'x'}, 1021) // padded
		ents[4].Data = nil
		for i := range ents {
			if err := w.addProto(recEntry, &ents[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.addProto(recHardState, &pb.HardState{Term: 2, Vote: 1, Commit: 5}); err != nil {
			t.Fatal(err)
		}
		return w.buf
	}
	want := lay(nil)
	dirty := bytes.Repeat([]byte{0xa5}, 2*len(want))
	if got := lay(dirty[:0]); !bytes.Equal(got, want) {
		t.Fatalf("records laid out in a reused buffer differ from a fresh one's:\n% x\nwant\n% x", got, want)
	}
}

// BenchmarkFollowerAppend: a follower writing a leader's MsgApp of 16
// entries of 1 KiB to its log (records laid out, one write, one
// fdatasync, the memory mirror), as its appender does; per entry.
func BenchmarkFollowerAppend(b *testing.B) {
	const perApp = 16
	ls, _, err := openLogStore(b.TempDir(), 1, logOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer ls.close()
	data := bytes.Repeat([]byte{'m'}, 1<<10)
	ents := make([]pb.Entry, perApp)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	next := uint64(1)
	for i := 0; i < b.N; i += perApp {
		for j := range ents {
			ents[j] = pb.Entry{Term: 1, Index: next, Data: data}
			next++
		}
		if err := ls.save(pb.HardState{Term: 1, Commit: next - 1}, ents, pb.Snapshot{}, true); err != nil {
			b.Fatal(err)
		}
		if first, _ := ls.solo.mem.FirstIndex(); next-first > 8192 { // keep the mirror short, as compaction does
			if err := ls.solo.mem.Compact(next - 1024); err != nil {
				b.Fatal(err)
			}
		}
	}
}
