package pebblestore_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// crashPointFS is a crashable memory file system that takes a crash image
// at each moment that matters to the store's synced mark: right after an
// fsync of a log file (before the store writes its mark), right after each
// write of the mark, and right after a log file is created or an old one
// reused for a new log. Each image keeps none, half or all of what was
// not synced, in turn: a power loss, a torn one, a crash of the process.
type crashPointFS struct {
	*vfs.MemFS
	acked *atomic.Int64 // writes acknowledged so far

	mu      sync.Mutex // guards the fields below
	images  []crashPoint
	renamed map[string]string // a log file's new name → its old, until opened
}

type crashPoint struct {
	what  string
	fs    *vfs.MemFS
	acked int
}

func (fs *crashPointFS) crash(what string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := len(fs.images)
	img := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: []int{0, 50, 100}[n%3], RNG: rand.New(rand.NewPCG(uint64(n), 1))})
	fs.images = append(fs.images, crashPoint{what: fmt.Sprintf("%d, %s", n, what), fs: img, acked: int(fs.acked.Load())})
}

func (fs *crashPointFS) wrap(what, name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	if strings.HasSuffix(name, ".log") {
		fs.crash(what + " " + name)
	}
	return crashPointFile{File: f, fs: fs, name: name}, nil
}

func (fs *crashPointFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.MemFS.Create(name, cat)
	return fs.wrap("created", name, f, err)
}

// Rename notes an old log file renamed for reuse: the store reuses one
// by a rename and an open (faultFS.ReuseForWrite).
func (fs *crashPointFS) Rename(oldname, newname string) error {
	err := fs.MemFS.Rename(oldname, newname)
	if err == nil && strings.HasSuffix(oldname, ".log") {
		fs.mu.Lock()
		fs.renamed[newname] = oldname
		fs.mu.Unlock()
	}
	return err
}

func (fs *crashPointFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.MemFS.OpenReadWrite(name, cat, opts...)
	what := "opened"
	fs.mu.Lock()
	if old, ok := fs.renamed[name]; ok {
		what = "reused " + old + " as"
		delete(fs.renamed, name)
	}
	fs.mu.Unlock()
	return fs.wrap(what, name, f, err)
}

type crashPointFile struct {
	vfs.File
	fs   *crashPointFS
	name string
}

func (f crashPointFile) Sync() error { return f.after("fsync of", f.File.Sync()) }

func (f crashPointFile) SyncData() error { return f.after("fsync of", f.File.SyncData()) }

func (f crashPointFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.after("write of", err)
}

func (f crashPointFile) after(what string, err error) error {
	if err == nil && (strings.HasSuffix(f.name, ".log") || strings.HasSuffix(f.name, "OMNIBUS-WAL-SYNCED")) {
		f.fs.crash(what + " " + f.name)
	}
	return err
}

// A crash at any moment around the log's fsyncs, the mark's writes and
// the switches from one log file to the next (new files and reused ones,
// with a checkpoint on the way) leaves a store that opens, without being
// refused as damaged, with every write acknowledged before the crash.
// The mark is written after the fsync it records, and only for the
// store's own log files, so no crash leaves it beyond what the log holds.
func TestNoCrashPointLeavesTheMarkBeyondTheLog(t *testing.T) {
	mem := &crashPointFS{MemFS: vfs.NewCrashableMem(), acked: new(atomic.Int64), renamed: map[string]string{}}
	s := mustOpen(t, "db", pebblestore.Options{FS: mem, LazySyncDelay: -1})
	n := 0
	for round := range 5 {
		count := 10
		if round == 3 {
			count = 3 // a reused log file, mostly the old log's bytes, when the checkpoint copies it
		}
		for range count {
			if err := s.Apply(msgBatch(n)); err != nil {
				t.Fatal(err)
			}
			n++
			mem.acked.Store(int64(n))
		}
		if round == 3 {
			if err := s.Checkpoint("ck"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil { // a switch of log, soon to a reused file
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reused := false
	for _, img := range mem.images {
		reused = reused || strings.Contains(img.what, "reused")
	}
	if !reused {
		t.Fatal("Pebble reused no old log file: the test needs it to")
	}
	for _, img := range mem.images {
		r, err := pebblestore.Open("db", pebblestore.Options{FS: img.fs})
		if err != nil {
			t.Fatalf("crash image %s: Open = %v", img.what, err)
		}
		want := map[int]bool{}
		for i := range img.acked {
			want[i] = true
		}
		for i := img.acked; i < n; i++ {
			if _, err := r.Get(msgKey(i)); err == nil {
				want[i] = true // written, not yet acknowledged: may survive
			}
		}
		checkMessages(t, r, want, n)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d crash images opened", len(mem.images))
}
