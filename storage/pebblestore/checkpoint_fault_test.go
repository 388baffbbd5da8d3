package pebblestore_test

import (
	"path"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// A checkpoint whose own files fail (a backup's scratch directory, a
// snapshot for a replica, on a disk that refuses them) fails, and only
// it: the store goes on taking writes and stays healthy, and a later
// checkpoint works. Its files used to be classed as the store's own by
// their names (a copy of the log, a MANIFEST, markers), so a failed write
// was retried for as long as it failed and a failed fsync parked the
// checkpoint for good and stopped the store's writes until a restart.
func TestCheckpointOnAFailingDiskFailsAlone(t *testing.T) {
	inCheckpoint := func(p string) bool { return p == "cp" || strings.HasPrefix(p, "cp/") }
	for _, tc := range []struct {
		name  string
		match func(errorfs.Op) bool
	}{
		{"writes", func(op errorfs.Op) bool { return writesTo()(op) && inCheckpoint(op.Path) }},
		{"fsyncs", func(op errorfs.Op) bool {
			// Not OPTIONS': its failed fsync was always returned.
			return (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) &&
				inCheckpoint(op.Path) && !strings.HasPrefix(path.Base(op.Path), "OPTIONS")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			inj := &injector{err: syscall.EIO, match: tc.match}
			s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj), Logger: zaptest.NewLogger(t)})
			defer s.Close()
			for i := range 10 {
				if err := s.Apply(msgBatch(i)); err != nil {
					t.Fatal(err)
				}
			}
			inj.on.Store(true)
			done := make(chan error, 1)
			go func() { done <- s.Checkpoint("cp") }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a checkpoint whose files all failed succeeded")
				}
				t.Logf("the checkpoint failed: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("a checkpoint whose files fail still waits on them after a minute")
			}
			if inj.hits.Load() == 0 {
				t.Fatal("no operation of the checkpoint failed: the test injects nothing")
			}
			if err := s.Apply(msgBatch(10)); err != nil {
				t.Fatalf("Apply after a failed checkpoint: %v", err)
			}
			if err := s.Health(); err != nil {
				t.Fatalf("Health after a failed checkpoint: %v", err)
			}
			inj.on.Store(false)
			if err := s.Checkpoint("cp2"); err != nil {
				t.Fatalf("a checkpoint after the disk recovered: %v", err)
			}
			c := mustOpen(t, "cp2", pebblestore.Options{FS: mem})
			defer c.Close()
			all := map[int]bool{}
			for i := range 11 {
				all[i] = true
			}
			checkMessages(t, c, all, 11)
		})
	}
}
