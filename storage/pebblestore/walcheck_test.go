package pebblestore_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"go.uber.org/zap/zaptest"
)

// walMessages is how many messages the WAL tests write: small synced
// batches, all in the write-ahead log (the memtable never fills).
const walMessages = 3000

// writeLog writes walMessages synced messages into a store on fs and
// returns it open.
func writeLog(t *testing.T, fs vfs.FS, dir string) *pebblestore.Store {
	t.Helper()
	s := mustOpen(t, dir, pebblestore.Options{FS: fs, MemTableSize: 64 << 20})
	for i := range walMessages {
		b := &storage.Batch{Sync: true}
		b.Set(msgKey(i), msgBody(i)[:300])
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// newestLog returns the path of the highest-numbered log file in dir.
func newestLog(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, n)
		}
	}
	if len(logs) == 0 {
		t.Fatal("no log file")
	}
	slices.Sort(logs)
	return fs.PathJoin(dir, logs[len(logs)-1])
}

// garble overwrites a few bytes of the file at the given fraction of its
// length.
func garble(t *testing.T, fs vfs.FS, path string, at float64) int64 {
	t.Helper()
	off := int64(float64(fileSize(t, fs, path)) * at)
	garbleAt(t, fs, path, off)
	return off
}

// garbleFromEnd overwrites a few bytes of the file back bytes before its
// end.
func garbleFromEnd(t *testing.T, fs vfs.FS, path string, back int64) {
	t.Helper()
	garbleAt(t, fs, path, fileSize(t, fs, path)-back)
}

func fileSize(t *testing.T, fs vfs.FS, path string) int64 {
	t.Helper()
	st, err := fs.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// garbleAt overwrites a few bytes of the file at offset off.
func garbleAt(t *testing.T, fs vfs.FS, path string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("GARBAGE-GARBAGE-GARBAGE"), off); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// cut keeps only the given fraction of the file.
func cut(t *testing.T, fs vfs.FS, path string, keep float64) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	data := make([]byte, int64(float64(st.Size())*keep))
	if _, err := f.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fs.Remove(path); err != nil {
		t.Fatal(err)
	}
	g, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(g.Sync(), g.Close()); err != nil {
		t.Fatal(err)
	}
}

// cutBytes removes the last n bytes of the file.
func cutBytes(t *testing.T, fs vfs.FS, path string, n int64) {
	t.Helper()
	size := fileSize(t, fs, path)
	cut(t, fs, path, float64(size-n)/float64(size))
	if got := fileSize(t, fs, path); got < size-n-1 || got > size-n {
		t.Fatalf("cut %s to %d bytes, want %d", path, got, size-n)
	}
}

// survivors counts the messages present, which must be a prefix of the
// messages written, each with its body.
func survivors(t *testing.T, s storage.Store) int {
	t.Helper()
	n := 0
	for i := range walMessages {
		v, err := s.Get(msgKey(i))
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil || string(v) != string(msgBody(i)[:300]) {
			t.Fatalf("message %d: %q, %v", i, v, err)
		}
		if n != i {
			t.Fatalf("message %d survived but message %d did not", i, n)
		}
		n++
	}
	return n
}

var walRefusalRE = regexp.MustCompile(`write-ahead log \S+\.log \(\d+ bytes\): replay stops at offset \d+.*; \d+ bytes dropped; .*--repair`)

// checkRefused opens without Repair and expects ErrCorrupt with a message
// that names the file, the offset and the bytes dropped.
func checkRefused(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{FS: fs, Logger: zaptest.NewLogger(t)})
	if err == nil {
		n := survivors(t, s)
		s.Close()
		t.Fatalf("opened a damaged log silently, with %d of %d acknowledged messages", n, walMessages)
	}
	if !errors.Is(err, storage.ErrCorrupt) || !walRefusalRE.MatchString(err.Error()) {
		t.Fatalf("Open = %v; want ErrCorrupt naming the log, the offset, the bytes dropped and --repair", err)
	}
	t.Logf("refused: %v", err)
}

// repairOpen opens with Repair, checks that a copy of the damaged log was
// kept and that what survives is a prefix, and returns how many survived.
func repairOpen(t *testing.T, fs vfs.FS, dir string) int {
	t.Helper()
	s := mustOpen(t, dir, pebblestore.Options{FS: fs, Repair: true, Logger: zaptest.NewLogger(t)})
	n := survivors(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	kept, err := fs.List(fs.PathJoin(dir, "omnibus-damaged"))
	if err != nil || len(kept) == 0 {
		t.Fatalf("no copy of the damaged log kept: %v %v", kept, err)
	}
	// Once repaired, the store opens without Repair and keeps what it has.
	s = mustOpen(t, dir, pebblestore.Options{FS: fs})
	defer s.Close()
	if m := survivors(t, s); m != n {
		t.Fatalf("after repair %d messages, after a plain reopen %d", n, m)
	}
	return n
}

// tailMargin is how far before the end of a crashed log the tests garble
// it (about nine of writeLog's records): far enough that the records after
// the damage always show three syncs made after it. Damage in the last
// three syncs' records of a crashed log cannot be told from a crash's
// torn tail unless the store's mark covers them (cmd/omnibus/README.md, "Failure
// behaviour"): each chunk carries the synced offset Pebble knew when it
// wrote it, and Pebble stores that offset only after waking the writers
// of the sync, so under load two records in a row may carry the same one.
const tailMargin = 3000

// A log garbled in its last block: Pebble alone replayed up to the damage
// and dropped the acknowledged messages after it without a word.
func TestLogGarbledNearItsEndRefusesToStart(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := writeLog(t, mem, "db")
	img := crashClone(mem, 0, 1)
	s.Close()
	garbleFromEnd(t, img, newestLog(t, img, "db"), tailMargin)
	checkRefused(t, img, "db")
	n := repairOpen(t, img, "db")
	if n == 0 || n >= walMessages {
		t.Fatalf("%d messages after repair: want those before the damage only", n)
	}
	t.Logf("repair kept %d of %d", n, walMessages)
}

// A log garbled in its very last record is refused once the store's mark
// covers that record: after a clean close, or after a crash that followed
// a write of the mark (the records after the damage prove nothing there).
func TestLogGarbledInItsLastRecordRefusedWhenTheMarkCoversIt(t *testing.T) {
	t.Run("after-close", func(t *testing.T) {
		mem := vfs.NewCrashableMem()
		s := writeLog(t, mem, "db")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		garbleFromEnd(t, mem, newestLog(t, mem, "db"), 100)
		checkRefused(t, mem, "db")
	})
	t.Run("after-crash", func(t *testing.T) {
		mem := vfs.NewCrashableMem()
		s := writeLog(t, mem, "db")
		s.WriteWALMark()
		img := crashClone(mem, 0, 1)
		s.Close()
		garbleFromEnd(t, img, newestLog(t, img, "db"), 100)
		checkRefused(t, img, "db")
	})
}

// A log garbled in its middle: Pebble refuses it too, now with the file,
// the offset and what would be dropped; Repair cuts it there.
func TestLogGarbledInTheMiddleRefusesToStart(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := writeLog(t, mem, "db")
	img := crashClone(mem, 0, 1)
	s.Close()
	garble(t, img, newestLog(t, img, "db"), 0.5)
	checkRefused(t, img, "db")
	if n := repairOpen(t, img, "db"); n == 0 || n >= walMessages {
		t.Fatalf("%d messages after repair: want those before the damage only", n)
	}
}

// A log cut short after a clean close: nothing left in the file shows the
// loss, the store's synced mark does.
func TestLogCutShortAfterCloseRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	s := writeLog(t, vfs.Default, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cut(t, vfs.Default, newestLog(t, vfs.Default, dir), 0.6)
	checkRefused(t, vfs.Default, dir)
	if n := repairOpen(t, vfs.Default, dir); n == 0 || n >= walMessages {
		t.Fatalf("%d messages after repair", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "omnibus-damaged")); err != nil {
		t.Fatal(err)
	}
}

// A log cut short after a crash is caught too, down to the last time the
// store wrote its mark.
func TestLogCutShortAfterACrashRefusesToStart(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := writeLog(t, mem, "db")
	s.WriteWALMark()
	img := crashClone(mem, 50, 3)
	s.Close()
	cut(t, img, newestLog(t, img, "db"), 0.5)
	checkRefused(t, img, "db")
}

// A log cut short right after acknowledged writes and a crash of the
// process (which keeps what was written but not fsynced, as kill -9
// does): the store rewrites its mark after every sync of the log, before
// the writes are acknowledged, so even a cut of the last record alone is
// caught, without waiting for the mark's once-a-second fsync.
func TestLogCutByItsLastRecordAfterAProcessCrashRefusesToStart(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := writeLog(t, mem, "db")
	img := crashClone(mem, 100, 1) // the process died: every write kept
	s.Close()
	log := newestLog(t, img, "db")
	cutBytes(t, img, log, 200) // less than the last record
	checkRefused(t, img, "db")
	if n := repairOpen(t, img, "db"); n != walMessages-1 {
		t.Fatalf("%d messages after repair, want all but the last", n)
	}
}

// Without damage nothing is refused: a crash that tore the unsynced tail
// (some of its blocks reached the disk, some did not) opens as before,
// with every synced batch, even when the mark was written just before.
func TestLogTornByACrashOpens(t *testing.T) {
	for _, percent := range []int{0, 30, 70, 100} {
		mem := vfs.NewCrashableMem()
		s := mustOpen(t, "db", pebblestore.Options{FS: mem, MemTableSize: 64 << 20, LazySyncDelay: -1})
		for i := range walMessages {
			b := msgBatch(i)
			b.Sync = i < walMessages/2
			if err := s.Apply(b); err != nil {
				t.Fatal(err)
			}
		}
		s.WriteWALMark()
		img := crashClone(mem, percent, uint64(percent))
		s.Close()
		r := mustOpen(t, "db", pebblestore.Options{FS: img, Logger: zaptest.NewLogger(t)})
		n := 0
		for i := range walMessages {
			if _, err := r.Get(msgKey(i)); err == nil {
				n++
			}
		}
		r.Close()
		if n < walMessages/2 {
			t.Fatalf("%d%% of the unsynced tail kept: %d messages, want the %d synced", percent, n, walMessages/2)
		}
	}
}

// A log that cannot be read for the check (the disk fails the store's
// reads of it, not Pebble's replay) refuses the open with ErrUnavailable
// naming the file: nothing then tells whether acknowledged records were
// lost. With Repair the store opens on what Pebble replayed.
func TestLogThatCannotBeCheckedRefusesToStart(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := writeLog(t, mem, "db")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	inj := &injector{err: syscall.EIO, match: func(op errorfs.Op) bool {
		return op.Kind == errorfs.OpFileReadAt && strings.HasSuffix(op.Path, ".log")
	}}
	inj.on.Store(true)
	fs := errorfs.Wrap(mem, inj)
	r, err := pebblestore.Open("db", pebblestore.Options{FS: fs, Logger: zaptest.NewLogger(t)})
	if err == nil {
		n := survivors(t, r)
		r.Close()
		t.Fatalf("opened on a log it could not check (%d reads failed), with %d messages", inj.hits.Load(), n)
	}
	if !errors.Is(err, storage.ErrUnavailable) || !regexp.MustCompile(`write-ahead log db/\d+\.log`).MatchString(err.Error()) ||
		!strings.Contains(err.Error(), "--repair") {
		t.Fatalf("Open on a log it cannot read = %v; want ErrUnavailable naming the log and --repair", err)
	}
	t.Logf("refused: %v", err)
	r = mustOpen(t, "db", pebblestore.Options{FS: fs, Repair: true, Logger: zaptest.NewLogger(t)})
	defer r.Close()
	if n := survivors(t, r); n != walMessages {
		t.Fatalf("with Repair: %d of %d messages", n, walMessages)
	}
}
