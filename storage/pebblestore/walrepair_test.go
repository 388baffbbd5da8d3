package pebblestore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"go.uber.org/zap/zaptest"
)

// flushCrashFS is a crashable memory file system that takes a crash image
// (a power loss: only what was fsynced) when the first sstable is created:
// during an open, once the logs are replayed (and repaired), as Pebble
// starts to flush what it replayed.
type flushCrashFS struct {
	*vfs.MemFS
	mu  sync.Mutex
	img *vfs.MemFS // guarded by mu
}

func (fs *flushCrashFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") {
		fs.mu.Lock()
		if fs.img == nil {
			fs.img = crashClone(fs.MemFS, 0, 1)
		}
		fs.mu.Unlock()
	}
	return fs.MemFS.Create(name, cat)
}

// A power loss during or right after a start with Repair must not bring
// back the loss the operator accepted: the next start, without Repair,
// opens with what the repair kept and every write acknowledged since. The
// store's mark, which said the log had been synced past the damage, is
// made to agree with the repaired log, durably, before the open goes on;
// before, a power loss while the open flushed what it replayed left the
// repaired log with the old mark, and the store refused to start again.
// (Once the open has flushed, Pebble never replays that log again: the
// image taken after the open checks the writes acknowledged since.) A
// repair also keeps a copy of the whole damaged log, not of the part it
// kept.
func TestPowerLossAfterARepairedStartOpens(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, fs vfs.FS, log string)
	}{
		{"cut", func(t *testing.T, fs vfs.FS, log string) { cut(t, fs, log, 0.5) }},        // the loss accepted as replayed
		{"garbled", func(t *testing.T, fs vfs.FS, log string) { garble(t, fs, log, 0.5) }}, // repairLog
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &flushCrashFS{MemFS: vfs.NewCrashableMem()}
			s := writeLog(t, mem.MemFS, "db")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			log := newestLog(t, mem, "db")
			tc.damage(t, mem, log)
			syncDir(t, mem, "db") // the damage is on disk for good
			damagedSize := fileSize(t, mem, log)
			checkRefused(t, mem, "db")

			r := mustOpen(t, "db", pebblestore.Options{FS: mem, Repair: true, LazySyncDelay: -1, Logger: zaptest.NewLogger(t)})
			kept := survivors(t, r)
			if kept == 0 || kept >= walMessages {
				t.Fatalf("%d messages after repair: want those before the damage only", kept)
			}
			const after = 20
			for i := range after { // acknowledged: the log fsynced, the mark written, not fsynced
				b := &storage.Batch{Sync: true}
				b.Set(afterKey(i), afterKey(i))
				if err := r.Apply(b); err != nil {
					t.Fatal(err)
				}
			}
			afterOpen := crashClone(mem.MemFS, 0, 1)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if mem.img == nil {
				t.Fatal("the repaired open flushed nothing: no crash image taken during it")
			}
			copies, err := mem.List(mem.PathJoin("db", "omnibus-damaged"))
			if err != nil || len(copies) != 1 {
				t.Fatalf("copies of the damaged log: %v, %v; want one", copies, err)
			}
			if n := fileSize(t, mem, mem.PathJoin("db", "omnibus-damaged", copies[0])); n != damagedSize {
				t.Fatalf("the copy of the damaged log has %d bytes, the damaged log had %d", n, damagedSize)
			}

			for _, img := range []struct {
				when  string
				fs    vfs.FS
				after int
			}{{"during the repaired open", mem.img, 0}, {"after the repaired open", afterOpen, after}} {
				c, err := pebblestore.Open("db", pebblestore.Options{FS: img.fs, Logger: zaptest.NewLogger(t)})
				if err != nil {
					t.Fatalf("power loss %s, then Open without Repair = %v; want the repaired store", img.when, err)
				}
				if n := survivors(t, c); n != kept {
					t.Fatalf("power loss %s: %d messages written before the repair, want the %d it kept", img.when, n, kept)
				}
				for i := range img.after {
					if v, err := c.Get(afterKey(i)); err != nil || string(v) != string(afterKey(i)) {
						t.Fatalf("power loss %s: write %d acknowledged after the repair: %q, %v", img.when, i, v, err)
					}
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func syncDir(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	d, err := fs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		t.Fatal(err)
	}
}

func afterKey(i int) []byte { return []byte{'a', '/', byte(i >> 8), byte(i)} }
