package raftstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// stateFaults fails, while on, every operation of the state database's
// file system on a path under prefix: a disk that refuses to open a
// received checkpoint (EIO here; ENOSPC and EMFILE take the same path).
type stateFaults struct {
	prefix atomic.Pointer[string]
	hits   atomic.Int64
}

func (f *stateFaults) MaybeError(op errorfs.Op) error {
	p := f.prefix.Load()
	if p == nil || !strings.HasPrefix(op.Path, *p) {
		return nil
	}
	f.hits.Add(1)
	return syscall.EIO
}

func (f *stateFaults) String() string { return "stateFaults" }

// A follower whose disk refuses to open the checkpoint it received stalls
// visibly, keeps the checkpoint, and installs it by itself once the disk
// takes it: it catches up with no restart.
func TestSnapshotInstallSurvivesADiskFault(t *testing.T) {
	faults := &stateFaults{}
	c := newTestCluster(t, 3, false, func(cfg *Config) {
		patientTiming(cfg)
		cfg.SnapshotEntries, cfg.catchUp, cfg.lagging = 20, 5, -1
		cfg.Store.FS = errorfs.Wrap(vfs.Default, faults)
	})
	s, leader := c.session()
	down := uint64(1)
	if down == leader {
		down = 2
	}
	c.stop(down)
	for i := range 100 {
		mustPut(t, s, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	waitFor(t, "the log to be compacted", func() bool {
		return c.nodes[leader].snapshotIndex.Load() > 20
	})
	// The follower comes back on state-000001 and receives the
	// checkpoint as state-000002: that is what the disk refuses.
	prefix := filepath.Join(c.dirs[down], stateDirName(2))
	faults.prefix.Store(&prefix)
	n := c.start(down)
	waitFor(t, "the follower to fail opening the checkpoint", func() bool { return faults.hits.Load() > 0 })
	waitFor(t, "the follower to report its stall", func() bool { return n.Status().Stalled })
	mustPut(t, s, "during", "fault") // the other two go on
	faults.prefix.Store(nil)
	waitFor(t, "the follower to install the checkpoint once the disk takes it", func() bool {
		return n.snapshotsInstalled.Load() > 0
	})
	mustPut(t, s, "after", "fault")
	waitFor(t, "the follower to catch up", func() bool {
		v, err := stateGet(n, "after")
		return err == nil && v == "fault"
	})
	if st := n.Status(); st.Stalled || st.Error != "" {
		t.Fatalf("the follower after the fault: %+v", st)
	}
	for i := range 100 {
		if v, err := stateGet(n, fmt.Sprintf("k%03d", i)); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("k%03d = %q, %v", i, v, err)
		}
	}
	if v, err := stateGet(n, "during"); err != nil || v != "fault" {
		t.Fatalf("during = %q, %v", v, err)
	}
}

// A checkpoint found neither where it was received nor where a failed
// install moved it cannot be installed by trying again: the error says
// so (the node fails visibly instead of retrying for ever).
func TestInstallOfAMissingCheckpointIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	s, err := openStateStore(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if _, _, err := s.install(filepath.Join(dir, snapScratchPrefix+"in-gone")); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("install of a checkpoint that is gone: %v; want %v", err, storage.ErrCorrupt)
	}
}
