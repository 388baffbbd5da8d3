package pebblestore_test

import (
	"errors"
	"os"
	"path/filepath"
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

// writeFlushed stores n messages in dir with a small memtable, so that
// their bodies are flushed into blob files, and closes the store.
func writeFlushed(t *testing.T, dir string, n int) []string {
	t.Helper()
	s := mustOpen(t, dir, pebblestore.Options{MemTableSize: 1 << 20})
	for i := 0; i < n; i += 100 {
		b := &storage.Batch{Sync: true}
		for j := i; j < i+100 && j < n; j++ {
			b.Set(msgKey(j), msgBody(j))
		}
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "*.blob"))
	if len(blobs) == 0 {
		t.Fatal("no blob files: the test would prove nothing")
	}
	return blobs
}

// readAll gets every message and sorts the outcomes: read intact,
// refused with ErrCorrupt naming the file, or anything else (a failure).
func readAll(t *testing.T, s storage.Store, n int, file string) (ok, corrupt int) {
	t.Helper()
	for i := range n {
		v, err := s.Get(msgKey(i))
		switch {
		case err == nil && string(v) == string(msgBody(i)):
			ok++
		case err == nil:
			t.Fatalf("message %d read back wrong", i)
		case errors.Is(err, storage.ErrCorrupt):
			if !strings.Contains(err.Error(), filepath.Base(file)) {
				t.Fatalf("ErrCorrupt without the file's name %s: %v", filepath.Base(file), err)
			}
			corrupt++
		default:
			t.Fatalf("message %d: Get = %v, want nil or ErrCorrupt", i, err)
		}
	}
	return ok, corrupt
}

// A blob file cut in half made Pebble panic on the first read of a body in
// it. Now each such read fails with ErrCorrupt naming the file, and every
// other message reads as before.
func TestBlobCutShortIsCorruptNotAPanic(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	blobs := writeFlushed(t, dir, n)
	st, err := os.Stat(blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blobs[0], st.Size()/2); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir, pebblestore.Options{Logger: zaptest.NewLogger(t)})
	defer s.Close()
	ok, corrupt := readAll(t, s, n, blobs[0])
	if corrupt == 0 || ok == 0 {
		t.Fatalf("%d intact, %d corrupt: want some of each", ok, corrupt)
	}
	// A second read of a damaged body fails the same way.
	if _, c := readAll(t, s, n, blobs[0]); c != corrupt {
		t.Fatalf("second pass: %d corrupt, first pass %d", c, corrupt)
	}
	t.Logf("%d intact, %d corrupt", ok, corrupt)
}

// A blob file garbled in the middle fails only the reads of the bodies in
// the damaged block, with ErrCorrupt naming the file.
func TestBlobGarbledIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	blobs := writeFlushed(t, dir, n)
	f, err := os.OpenFile(blobs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte("garbage garbage garbage"), st.Size()/3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := mustOpen(t, dir, pebblestore.Options{Logger: zaptest.NewLogger(t)})
	defer s.Close()
	ok, corrupt := readAll(t, s, n, blobs[0])
	if corrupt == 0 || ok < n-100 {
		t.Fatalf("%d intact, %d corrupt: want a few corrupt, the rest intact", ok, corrupt)
	}
	err = s.Scan([]byte("m/"), nil, func(_, _ []byte) (bool, error) { return true, nil })
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("Scan over a damaged body = %v, want ErrCorrupt", err)
	}
}

// Opening on a full disk fails at once with ErrNoSpace naming the write,
// instead of Pebble retrying its flush forever; the files it was blocked
// writing are removed, and the directory can be opened again in the same
// process once space returns.
func TestOpenOnAFullDiskFailsFast(t *testing.T) {
	t.Run("CreateFails", func(t *testing.T) { testOpenOnAFullDisk(t, writesTo()) })
	t.Run("WriteFails", func(t *testing.T) {
		// Creating an empty file takes no block on most file systems.
		all := writesTo()
		testOpenOnAFullDisk(t, func(op errorfs.Op) bool { return op.Kind != errorfs.OpCreate && all(op) })
	})
}

func testOpenOnAFullDisk(t *testing.T, match func(errorfs.Op) bool) {
	mem := vfs.NewMem()
	s := mustOpen(t, "db", pebblestore.Options{FS: mem})
	for i := range 200 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := mem.List("db")
	slices.Sort(before)

	inj := &injector{err: syscall.ENOSPC, match: match}
	inj.on.Store(true)
	_, err := pebblestore.Open("db", pebblestore.Options{FS: errorfs.Wrap(mem, inj), Logger: zaptest.NewLogger(t)})
	if !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("Open on a full disk = %v, want ErrNoSpace", err)
	}
	t.Logf("Open: %v", err)
	after, _ := mem.List("db")
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Fatalf("the failed open changed the directory:\n before %v\n after  %v", before, after)
	}

	inj.on.Store(false)
	r := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj)})
	defer r.Close()
	acked := map[int]bool{}
	for i := range 200 {
		acked[i] = true
	}
	checkMessages(t, r, acked, 200)
}
