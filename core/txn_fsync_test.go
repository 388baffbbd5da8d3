package core_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// walSyncFS counts the fsyncs of Pebble's write-ahead log: what a
// durable write costs the disk.
type walSyncFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (fs *walSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &walSyncFile{File: f, n: &fs.syncs}, nil
}

func (fs *walSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *walSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs *walSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

type walSyncFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *walSyncFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f *walSyncFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f *walSyncFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.n.Add(1)
	}
	return full, err
}

// The exactly-once step — complete the input, send the output through
// the same entity to another queue — costs the disk one fsync when its
// transaction commits, where the same work outside a transaction costs
// one per operation.
func TestTxnCommitIsOneFsync(t *testing.T) {
	fs := &walSyncFS{FS: vfs.NewMem()}
	// No lazy syncs: every fsync counted is one a write asked for.
	st, err := pebblestore.Open("db", pebblestore.Options{FS: fs, LazySyncDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := core.New(core.Config{Store: st, Clock: clock.NewFake(coretest.Epoch)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(); _ = st.Close() })
	for _, q := range []string{"in", "out"} {
		if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Send(t.Context(), "in", coretest.Text("a"), coretest.Text("b")); err != nil {
		t.Fatal(err)
	}
	got, err := b.Receive(coretest.Now(t), "in", core.ReceiveOptions{Mode: core.PeekLock, Max: 2})
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %d messages, %v", len(got), err)
	}

	before := fs.syncs.Load()
	tx := b.BeginTxn()
	if err := tx.Settle("in", got[0].LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send("out", "in", []*core.Message{coretest.Text("result")}); err != nil {
		t.Fatal(err)
	}
	if n := fs.syncs.Load() - before; n != 0 {
		t.Fatalf("%d fsyncs before the commit, want none", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := fs.syncs.Load() - before; n != 1 {
		t.Fatalf("the commit of a complete and a send cost %d fsyncs, want 1", n)
	}

	// The same work without a transaction: one fsync per operation (so
	// the counter does count what a durable write costs).
	before = fs.syncs.Load()
	if err := b.Settle(t.Context(), "in", got[1].LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), "out", coretest.Text("result")); err != nil {
		t.Fatal(err)
	}
	if n := fs.syncs.Load() - before; n != 2 {
		t.Fatalf("a complete and a send outside a transaction cost %d fsyncs, want 2", n)
	}
	if c, err := b.Counts("out"); err != nil || c.Active != 2 {
		t.Fatalf("out: %+v %v", c, err)
	}
}
