package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage"
)

// faultLogFS is the real file system with faults on demand: the next
// writes, fdatasyncs, preallocations or directory syncs fail with a
// given error. A failed fdatasync can also lose what was written since
// the file's last successful one (zeros in its place), as a kernel that
// dropped the pages it could not write would.
type faultLogFS struct {
	osLogFS
	mu sync.Mutex // guards the fields below
	// failures left of each kind, and the error they return
	writes, syncs, allocs, dirSyncs int
	err                             error
	// loseOnFailedSync: a failed fdatasync zeroes the unsynced bytes.
	loseOnFailedSync bool
	// counts of successful calls
	okSyncs, okWrites, okAllocs int
	// frozen, while not nil, holds every fdatasync until it is closed
	// (thaw): a disk that stalls; stuck counts the fdatasyncs it held.
	frozen chan struct{}
	stuck  int
}

// freeze makes every fdatasync from now on wait until thaw.
func (fs *faultLogFS) freeze() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.frozen == nil {
		fs.frozen = make(chan struct{})
	}
}

// thaw lets the held fdatasyncs go on.
func (fs *faultLogFS) thaw() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.frozen != nil {
		close(fs.frozen)
		fs.frozen = nil
	}
}

// holding reports whether the disk is frozen, and how many fdatasyncs it
// has held so far.
func (fs *faultLogFS) holding() (frozen bool, stuck int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.frozen != nil, fs.stuck
}

// waitThawed holds an fdatasync while the disk is frozen.
func (fs *faultLogFS) waitThawed() {
	fs.mu.Lock()
	ch := fs.frozen
	if ch != nil {
		fs.stuck++
	}
	fs.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// fail makes the next n operations of the kind kind fail with err.
func (fs *faultLogFS) fail(kind string, n int, err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.err = err
	switch kind {
	case "write":
		fs.writes = n
	case "sync":
		fs.syncs = n
	case "alloc":
		fs.allocs = n
	case "dirsync":
		fs.dirSyncs = n
	default:
		panic(kind)
	}
}

// take reports whether an operation counted by *n fails now.
func (fs *faultLogFS) take(n *int) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if *n > 0 {
		*n--
		return fs.err
	}
	return nil
}

func (fs *faultLogFS) Create(path string) (logFile, error) {
	f, err := fs.osLogFS.Create(path)
	if err != nil {
		return nil, err
	}
	return &faultLogFile{logFile: f, fs: fs}, nil
}

func (fs *faultLogFS) OpenRW(path string) (logFile, error) {
	f, err := fs.osLogFS.OpenRW(path)
	if err != nil {
		return nil, err
	}
	return &faultLogFile{logFile: f, fs: fs}, nil
}

func (fs *faultLogFS) SyncDir(dir string) error {
	if err := fs.take(&fs.dirSyncs); err != nil {
		return err
	}
	return fs.osLogFS.SyncDir(dir)
}

// faultLogFile remembers what was written since its last successful
// fdatasync, to lose it on demand.
type faultLogFile struct {
	logFile
	fs       *faultLogFS
	from, to int64 // the unsynced range (from == to: none)
}

func (f *faultLogFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.take(&f.fs.writes); err != nil {
		// A failing disk may take part of the write.
		n, _ := f.logFile.WriteAt(p[:len(p)/2], off)
		f.note(off, off+int64(n))
		return n, err
	}
	n, err := f.logFile.WriteAt(p, off)
	f.note(off, off+int64(n))
	f.fs.mu.Lock()
	f.fs.okWrites++
	f.fs.mu.Unlock()
	return n, err
}

// WritevAt fails, or succeeds, as WriteAt of the buffers' concatenation.
func (f *faultLogFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	return f.WriteAt(bytes.Join(bufs, nil), off)
}

func (f *faultLogFile) note(from, to int64) {
	if f.from == f.to {
		f.from, f.to = from, to
		return
	}
	f.from, f.to = min(f.from, from), max(f.to, to)
}

func (f *faultLogFile) Datasync() error {
	f.fs.waitThawed()
	if err := f.fs.take(&f.fs.syncs); err != nil {
		f.fs.mu.Lock()
		lose := f.fs.loseOnFailedSync
		f.fs.mu.Unlock()
		if lose && f.to > f.from {
			_, _ = f.logFile.WriteAt(make([]byte, f.to-f.from), f.from)
			_ = f.logFile.Datasync()
		}
		f.from, f.to = 0, 0
		return err
	}
	f.from, f.to = 0, 0
	f.fs.mu.Lock()
	f.fs.okSyncs++
	f.fs.mu.Unlock()
	return f.logFile.Datasync()
}

func (f *faultLogFile) Allocate(size int64) error {
	if err := f.fs.take(&f.fs.allocs); err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.okAllocs++
	f.fs.mu.Unlock()
	return f.logFile.Allocate(size)
}

var (
	errEIO    = syscall.EIO
	errNoSpce = syscall.ENOSPC
)

// A write, fdatasync, preallocation or directory sync the disk refuses
// fails the save with ErrUnavailable and changes nothing in memory; the
// same save again succeeds once the disk takes it, and the log reads back
// exactly (no hole where the failed write was, no duplicate).
func TestLogDiskFaults(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		n     int // failures in a row
		err   error
		lose  bool // a failed fsync loses the unsynced bytes
		small bool // small segments: the failed write starts one
	}{
		{kind: "write", n: 1, err: errEIO},
		{kind: "write", n: 3, err: errNoSpce},
		{kind: "sync", n: 1, err: errEIO, lose: true},
		{kind: "sync", n: 3, err: errEIO, lose: true},
		{kind: "alloc", n: 2, err: errNoSpce, small: true},
		{kind: "dirsync", n: 2, err: errEIO, small: true},
		{kind: "sync", n: 2, err: errEIO, lose: true, small: true},
	} {
		t.Run(fmt.Sprintf("%s x%d %v small=%v", tc.kind, tc.n, tc.err, tc.small), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "raftlog")
			fs := &faultLogFS{loseOnFailedSync: tc.lose}
			o := logOptions{fs: fs}
			if tc.small {
				o.segmentBytes = 2 << 10
			}
			ls := openLog(t, dir, o)
			var want []pb.Entry
			save := func(from, to uint64) {
				t.Helper()
				ents := testEntries(from, to, 1)
				mustSave(t, ls, pb.HardState{Term: 1, Commit: to}, ents)
				want = append(want, ents...)
			}
			for i := uint64(1); i <= 30; i += 10 {
				save(i, i+9)
			}
			// Fill the segment so that the next write starts a new one.
			next := uint64(31)
			for tc.small && ls.act.off+700 < o.segmentBytes {
				save(next, next)
				next++
			}
			fs.fail(tc.kind, tc.n, tc.err)
			ents := testEntries(next, next+9, 1)
			hs := pb.HardState{Term: 1, Commit: next + 9}
			for i := 0; i < tc.n; i++ {
				err := ls.save(hs, ents, pb.Snapshot{}, true)
				if !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, tc.err) {
					t.Fatalf("save %d with the disk failing: %v; want ErrUnavailable wrapping %v", i, err, tc.err)
				}
				if last, _ := ls.solo.mem.LastIndex(); last != next-1 {
					t.Fatalf("a failed save reached memory: last index %d", last)
				}
			}
			mustSave(t, ls, hs, ents)
			want = append(want, ents...)
			// Nothing past the failed write's start is trusted: the
			// write went to a new segment.
			if segs := segFiles(t, dir); len(segs) != 2 {
				t.Fatalf("segments after the fault: %v; want a second one", segs)
			}
			save(next+10, next+19)
			wantEntries(t, ls, want)
			ls.close()
			ls = openLog(t, dir, o)
			wantEntries(t, ls, want)
			if got, _, _ := ls.solo.mem.InitialState(); got.Commit != next+19 {
				t.Fatalf("hard state after reopen %+v", got)
			}
		})
	}
}

// A failed fsync whose bytes the kernel dropped, then a crash before any
// retry: the log reopens with what was durable before it.
func TestLogFailedSyncThenCrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	fs := &faultLogFS{loseOnFailedSync: true}
	ls := openLog(t, dir, logOptions{fs: fs})
	mustSave(t, ls, pb.HardState{Term: 1, Commit: 10}, testEntries(1, 10, 1))
	fs.fail("sync", 1, errEIO)
	if err := ls.save(pb.HardState{Term: 1, Commit: 20}, testEntries(11, 20, 1), pb.Snapshot{}, true); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("save: %v", err)
	}
	ls.act.f.Close() // the process dies: no close
	ls.closed.Store(true)
	ls = openLog(t, dir, logOptions{})
	wantEntries(t, ls, testEntries(1, 10, 1))
}

// A node whose log disk fails stalls (its Session ends, it serves
// nothing) without ending the process, and serves again once the disk
// takes writes; nothing acknowledged is lost, before or after a restart.
func TestLogDiskFaultStallsNode(t *testing.T) {
	fs := &faultLogFS{}
	c := newTestCluster(t, 1, false, func(cfg *Config) { cfg.logFS = fs })
	s, id := c.session()
	mustPut(t, s, "before", "fault")
	fs.fail("sync", 1<<30, errEIO)
	b := &storage.Batch{Sync: true}
	b.Set([]byte("during"), []byte("fault"))
	if err := s.Apply(b); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Apply with the log's disk failing: %v; want ErrUnavailable", err)
	}
	n := c.nodes[id]
	waitFor(t, "the node to report its stall", func() bool { return n.Status().Stalled })
	fs.fail("sync", 0, nil)
	waitFor(t, "the node to write again", func() bool { return !n.Status().Stalled })
	s, _ = c.session()
	mustPut(t, s, "after", "fault")
	if v, err := s.Get([]byte("before")); err != nil || string(v) != "fault" {
		t.Fatalf("before = %q, %v", v, err)
	}
	c.stop(id)
	c.start(id)
	s, _ = c.session()
	for _, k := range []string{"before", "after"} {
		if v, err := s.Get([]byte(k)); err != nil || string(v) != "fault" {
			t.Fatalf("after a restart %s = %q, %v", k, v, err)
		}
	}
}

// Compaction keeps one freed segment file as the spare, and the next
// segment is written over it instead of a new, preallocated file (whose
// fdatasyncs would commit metadata); the old records in it never read as
// the new segment's, after a clean stop or a torn write.
func TestLogRecyclesSegments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "raftlog")
	fs := &faultLogFS{}
	o := logOptions{fs: fs, segmentBytes: 8 << 10}
	ls := openLog(t, dir, o)
	allocs := func() int {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.okAllocs
	}
	cs := pb.ConfState{Voters: []uint64{1}}
	next := uint64(1)
	save := func(n uint64) {
		t.Helper()
		mustSave(t, ls, pb.HardState{Term: 1, Commit: next + n - 1}, testEntries(next, next+n-1, 1))
		next += n
	}
	compact := func() {
		t.Helper()
		if err := ls.compact(next-1, cs, next-5); err != nil {
			t.Fatal(err)
		}
	}
	for len(segFiles(t, dir)) < 3 {
		save(10)
	}
	compact()
	if _, err := os.Stat(filepath.Join(dir, spareName)); err != nil {
		t.Fatalf("no spare after a compaction freed a segment: %v", err)
	}
	before := allocs()
	for range 10 { // ten rotations, each taking the spare the last compaction left
		seg := len(segFiles(t, dir))
		for len(segFiles(t, dir)) == seg {
			save(10)
		}
		compact()
	}
	if n := allocs() - before; n != 0 {
		t.Fatalf("%d new segment files were preallocated over ten rotations; want every one recycled", n)
	}
	if n := len(segFiles(t, dir)); n > 3 {
		t.Fatalf("%d segments after compacting to the last 5 entries", n)
	}
	save(4)
	want := testEntries(next-4, next-1, 1) // what follows the snapshot
	wantEntries(t, ls, append(testEntries(next-9, next-5, 1), want...))
	ls.close()

	// The last segment is recycled: what follows its records is old ones.
	ls = openLog(t, dir, o)
	wantEntries(t, ls, want)
	last := lastSegment(t, dir)
	start := ls.act.off
	save(3)
	end := ls.act.off
	ls.close()
	patch(t, last, (start+end)/2, make([]byte, 8)) // tear the last write
	ls = openLog(t, dir, o)
	got := logEntries(t, ls)
	if len(got) < 4 || got[len(got)-1].Index >= next-1 {
		t.Fatalf("after a torn write into a recycled segment the log holds %v; want the write cut", span(got))
	}
}

// newFaultDiskCluster starts size nodes with patient timing, each writing
// its log through a faultLogFS of its own, returned by node id.
func newFaultDiskCluster(t testing.TB, size int, mem bool) (*testCluster, map[uint64]*faultLogFS) {
	disks := map[uint64]*faultLogFS{}
	for id := uint64(1); id <= uint64(size); id++ {
		disks[id] = &faultLogFS{}
	}
	c := newTestCluster(t, size, mem, func(cfg *Config) {
		patientTiming(cfg)
		cfg.logFS = disks[cfg.ID]
	})
	return c, disks
}
