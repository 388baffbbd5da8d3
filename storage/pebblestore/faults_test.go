package pebblestore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"go.uber.org/zap/zaptest"
)

// injector fails the file operations it matches with err while on.
type injector struct {
	on    atomic.Bool
	err   error
	match func(op errorfs.Op) bool
	hits  atomic.Int64
}

func (i *injector) String() string { return "test injector" }

func (i *injector) MaybeError(op errorfs.Op) error {
	if !i.on.Load() || !i.match(op) {
		return nil
	}
	i.hits.Add(1)
	return i.err
}

// writesTo matches the operations that take space (creating, writing and
// allocating) on files whose names end with one of the suffixes; no
// suffix matches every file.
func writesTo(suffixes ...string) func(errorfs.Op) bool {
	return func(op errorfs.Op) bool {
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate:
		default:
			return false
		}
		return len(suffixes) == 0 || slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(op.Path, s) })
	}
}

// syncsOf matches the fsyncs of files whose names end with suffix.
func syncsOf(suffix string) func(errorfs.Op) bool {
	return func(op errorfs.Op) bool {
		return (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) && strings.HasSuffix(op.Path, suffix)
	}
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// msgKey and msgBatch model a send: a new key with a body of 1 KiB, large
// enough to go to a blob file when flushed.
func msgKey(i int) []byte { return fmt.Appendf(nil, "m/%06d", i) }

func msgBody(i int) []byte { return fmt.Appendf(nil, "%01024d", i) }

func msgBatch(i int) *storage.Batch {
	b := &storage.Batch{Sync: true}
	b.Set(msgKey(i), msgBody(i))
	return b
}

// checkMessages fails the test unless exactly the messages in want are
// stored, each with its body.
func checkMessages(t *testing.T, s storage.Store, want map[int]bool, upTo int) {
	t.Helper()
	for i := range upTo {
		v, err := s.Get(msgKey(i))
		switch {
		case want[i] && err != nil:
			t.Fatalf("message %d was acknowledged but Get says %v", i, err)
		case want[i] && string(v) != string(msgBody(i)):
			t.Fatalf("message %d holds a wrong body", i)
		case !want[i] && !errors.Is(err, storage.ErrNotFound):
			t.Fatalf("message %d should be absent: Get = %v", i, err)
		}
	}
}

// A full disk under the write-ahead log: the commit in flight waits, every
// other write is refused at once with ErrNoSpace, reads go on, Health says
// why, and when space returns the waiting commit completes, Health clears
// by itself and nothing acknowledged is lost. Pebble never sees the error,
// so nothing calls Fatalf or panics. A disk that fails writes with EIO, or
// turns read-only, is met the same way, with ErrUnavailable, except that
// the commit in flight does not wait for it (it may never come back): it
// returns at once with ErrOutcomeUnknown, and is done or not once the disk
// is back.
func TestFailingLogWritesRefuseAndRecover(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"ENOSPC", syscall.ENOSPC, storage.ErrNoSpace},
		{"EDQUOT", syscall.EDQUOT, storage.ErrNoSpace},
		{"EIO", syscall.EIO, storage.ErrUnavailable},
		{"EROFS", syscall.EROFS, storage.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) { testLogWriteFails(t, tc.err, tc.want) })
	}
}

func testLogWriteFails(t *testing.T, injected, want error) {
	waits := errors.Is(want, storage.ErrNoSpace) // the commit in flight waits for space
	mem := vfs.NewCrashableMem()
	inj := &injector{err: injected, match: writesTo()}
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj), Logger: zaptest.NewLogger(t)})
	acked := map[int]bool{}
	for i := range 20 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
		acked[i] = true
	}

	inj.on.Store(true)
	inFlight := make(chan error, 1)
	go func() { inFlight <- s.Apply(msgBatch(20)) }()
	waitFor(t, "Health to report the failing disk", func() bool { return errors.Is(s.Health(), want) })
	t.Logf("Health: %v", s.Health())

	if err := s.Apply(msgBatch(21)); !errors.Is(err, want) {
		t.Fatalf("send while the log cannot be written: Apply = %v, want %v", err, want)
	}
	del := &storage.Batch{Sync: true}
	del.Delete(msgKey(0))
	if err := s.Apply(del); !errors.Is(err, want) {
		t.Fatalf("deletion while the log cannot be written: Apply = %v, want %v", err, want)
	}
	if v, err := s.Get(msgKey(3)); err != nil || string(v) != string(msgBody(3)) {
		t.Fatalf("read on a full disk: Get = %q, %v", v, err)
	}
	n := 0
	if err := s.Scan([]byte("m/"), nil, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil || n < 20 {
		t.Fatalf("scan on a full disk: %d keys, %v", n, err)
	}
	if waits {
		select {
		case err := <-inFlight:
			t.Fatalf("the commit in flight returned while the disk was full: %v", err)
		default:
		}
	} else if err := <-inFlight; !errors.Is(err, storage.ErrOutcomeUnknown) || !errors.Is(err, want) {
		t.Fatalf("the commit in flight when the disk failed: Apply = %v, want %v and ErrOutcomeUnknown", err, want)
	}

	inj.on.Store(false) // space (or the disk) returns
	if waits {
		if err := <-inFlight; err != nil {
			t.Fatalf("the commit in flight when the disk filled: %v", err)
		}
		acked[20] = true
	}
	waitFor(t, "Health to clear", func() bool { return s.Health() == nil })
	if err := s.Apply(msgBatch(21)); err != nil {
		t.Fatalf("send after space returned: %v", err)
	}
	acked[21] = true
	img := crashClone(mem, 0, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, "db", pebblestore.Options{FS: img})
	defer r.Close()
	if !waits {
		// Its outcome was unknown: the retried write went through once the
		// disk came back, so it is there, whole.
		acked[20] = true
	}
	checkMessages(t, r, acked, 25)
}

// A full disk under a memtable flush (sstables and blob files): writes
// that grow the store are refused, settlements (deletions, state rewritten
// in place) still go through, and all is normal once space returns.
func TestFullDiskUnderAFlushKeepsSettlementsGoing(t *testing.T) {
	inj := &injector{err: syscall.ENOSPC, match: writesTo(".sst", ".blob")}
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(vfs.NewMem(), inj), Logger: zaptest.NewLogger(t)})
	defer s.Close()
	acked := map[int]bool{}
	for i := range 100 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
		acked[i] = true
	}
	inj.on.Store(true)
	if err := s.FlushAsync(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Health to report the blocked flush", func() bool { return errors.Is(s.Health(), storage.ErrNoSpace) })

	if err := s.Apply(msgBatch(100)); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("send while the flush is blocked: Apply = %v, want ErrNoSpace", err)
	}
	settle := &storage.Batch{Sync: true}
	settle.Delete(msgKey(0))
	settle.Delete(msgKey(1))
	if err := s.Apply(settle); err != nil {
		t.Fatalf("settlement while the flush is blocked: %v", err)
	}
	delete(acked, 0)
	delete(acked, 1)
	rewrite := &storage.Batch{Sync: true}
	rewrite.Set(msgKey(2), msgBody(2)) // same size: a state record rewritten
	if err := s.Apply(rewrite); err != nil {
		t.Fatalf("rewrite in place while the flush is blocked: %v", err)
	}
	moved := &storage.Batch{Sync: true} // a move: one record out, one as large in
	moved.Delete(msgKey(3))
	moved.Set(msgKey(1000), msgBody(3))
	if err := s.Apply(moved); err != nil {
		t.Fatalf("move while the flush is blocked: %v", err)
	}

	inj.on.Store(false)
	waitFor(t, "Health to clear", func() bool { return s.Health() == nil })
	if err := s.Apply(msgBatch(100)); err != nil {
		t.Fatalf("send after space returned: %v", err)
	}
	acked[100] = true
	delete(acked, 3)
	checkMessages(t, s, acked, 101)
}

// A failed fsync of the write-ahead log cannot be retried safely (the
// kernel may have dropped the pages): every commit in flight returns at
// once with ErrUnavailable and ErrOutcomeUnknown (it may or may not be on
// disk) instead of waiting for good, the store refuses every later write
// with ErrUnavailable until restarted, reads go on, and Close returns at
// once without exiting. After the restart everything acknowledged before
// is there, and each commit in flight is wholly there or wholly absent.
func TestFailedLogFsyncStopsWritesUntilRestart(t *testing.T) {
	mem := vfs.NewCrashableMem()
	inj := &injector{err: syscall.EIO, match: syncsOf(".log")}
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj), Logger: zaptest.NewLogger(t)})
	acked := map[int]bool{}
	for i := range 10 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
		acked[i] = true
	}
	inj.on.Store(true)
	// Commits sent at once: those that reach Pebble before the fsync fails
	// wait on it, and must come back with the outcome unknown; any that
	// come after are refused (nothing written).
	const inFlight = 4
	answers := make(chan error, inFlight)
	for i := range inFlight {
		go func() { answers <- s.Apply(msgBatch(10 + i)) }()
	}
	unknown := 0
	for range inFlight {
		select {
		case err := <-answers:
			switch {
			case errors.Is(err, storage.ErrOutcomeUnknown) && errors.Is(err, storage.ErrUnavailable):
				unknown++
			case errors.Is(err, storage.ErrUnavailable):
			default:
				t.Fatalf("a commit sent as the fsync failed: Apply = %v, want ErrUnavailable", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("a commit in flight when the fsync failed never returned")
		}
	}
	if unknown == 0 {
		t.Fatal("no commit came back with ErrOutcomeUnknown: none was in flight when the fsync failed")
	}
	t.Logf("%d of %d commits were in flight when the fsync failed", unknown, inFlight)
	inj.on.Store(false) // too late: an fsync that failed is never trusted again
	if err := s.Apply(msgBatch(20)); !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrOutcomeUnknown) {
		t.Fatalf("Apply after a failed fsync = %v, want ErrUnavailable (refused: nothing written)", err)
	}
	if err := s.Health(); !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("Health = %v, want ErrUnavailable naming the fsync", err)
	}
	if _, err := s.Get(msgKey(5)); err != nil {
		t.Fatalf("read after a failed fsync: %v", err)
	}
	img := crashClone(mem, 0, 2)
	if err := s.Close(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Close with a parked fsync = %v, want ErrUnavailable", err)
	}
	// The abandoned database released its directory: it opens again in
	// this process (as after a restart of the process: the crash image).
	r := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj)})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustOpen(t, "db", pebblestore.Options{FS: img})
	defer r.Close()
	for i := range 10 {
		if _, err := r.Get(msgKey(i)); err != nil {
			t.Fatalf("message %d acknowledged before the failed fsync: %v", i, err)
		}
	}
	for i := 10; i < 10+inFlight; i++ {
		if v, err := r.Get(msgKey(i)); err == nil && string(v) != string(msgBody(i)) {
			t.Fatalf("message %d, in flight when the fsync failed, came back with a wrong body", i)
		} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("message %d, in flight when the fsync failed: Get = %v", i, err)
		}
	}
}

// A process stopping while a full disk blocks the write-ahead log: the
// commit waiting on the log returns (ErrOutcomeUnknown) once the store
// gives up on its disk, so its client is answered and nothing waits for
// the disk; Close then returns at once. A healthy store does not give up.
func TestGiveUpOnDiskAnswersBlockedCommits(t *testing.T) {
	mem := vfs.NewCrashableMem()
	inj := &injector{err: syscall.ENOSPC, match: writesTo(".log")}
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj), Logger: zaptest.NewLogger(t)})
	for i := range 10 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	if s.GiveUpOnDisk() {
		t.Fatal("GiveUpOnDisk gave up on a healthy disk")
	}
	if err := s.Apply(msgBatch(10)); err != nil {
		t.Fatalf("Apply after GiveUpOnDisk on a healthy disk: %v", err)
	}
	inj.on.Store(true)
	blocked := make(chan error, 1)
	go func() { blocked <- s.Apply(msgBatch(11)) }()
	waitFor(t, "Health to report the full disk", func() bool { return errors.Is(s.Health(), storage.ErrNoSpace) })
	select {
	case err := <-blocked:
		t.Fatalf("the commit on a full disk returned before the store gave up: %v", err)
	default:
	}
	if !s.GiveUpOnDisk() {
		t.Fatal("GiveUpOnDisk did not give up on a full disk under the log")
	}
	select {
	case err := <-blocked:
		if !errors.Is(err, storage.ErrOutcomeUnknown) {
			t.Fatalf("the commit blocked on a full disk: Apply = %v, want ErrOutcomeUnknown", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the commit blocked on a full disk never returned after GiveUpOnDisk")
	}
	if err := s.Close(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Close after giving up = %v, want ErrUnavailable", err)
	}
	r := mustOpen(t, "db", pebblestore.Options{FS: crashClone(mem, 0, 3)})
	defer r.Close()
	checkMessages(t, r, map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true}, 11)
}

// Below the free-space reserve, batches that grow the store are refused
// with ErrNoSpace and leave nothing behind; batches that delete or
// rewrite in place go through; once space returns Health clears by itself.
func TestReserveRefusesGrowthNotSettlements(t *testing.T) {
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 900 << 20, TotalBytes: 1 << 30})
	s := mustOpen(t, "db", pebblestore.Options{FS: mem, DiskReserve: 100 << 20})
	defer s.Close()
	for i := range 10 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 50 << 20, TotalBytes: 1 << 30})
	waitFor(t, "Health to report the reserve", func() bool { return errors.Is(s.Health(), storage.ErrNoSpace) })
	err := s.Apply(msgBatch(10))
	if !errors.Is(err, storage.ErrNoSpace) || !strings.Contains(err.Error(), "reserve") {
		t.Fatalf("send below the reserve: Apply = %v, want ErrNoSpace naming the reserve", err)
	}
	if _, err := s.Get(msgKey(10)); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused batch left its key: Get = %v", err)
	}
	del := &storage.Batch{Sync: true}
	del.Delete(msgKey(0))
	if err := s.Apply(del); err != nil {
		t.Fatalf("deletion below the reserve: %v", err)
	}
	bigger := &storage.Batch{Sync: true}
	bigger.Set(msgKey(1), append(msgBody(1), msgBody(1)...))
	if err := s.Apply(bigger); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("a rewrite twice as large below the reserve: Apply = %v, want ErrNoSpace", err)
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 500 << 20, TotalBytes: 1 << 30})
	waitFor(t, "Health to clear", func() bool { return s.Health() == nil })
	if err := s.Apply(msgBatch(10)); err != nil {
		t.Fatalf("send once space returned: %v", err)
	}
}

// While a flush is blocked, settlements go on until Pebble stalls writes
// (too many memtables wait for the flush); then every write is refused at
// once rather than left waiting, and all resumes when space returns.
func TestBlockedFlushAndAWriteStallRefuseEverything(t *testing.T) {
	inj := &injector{err: syscall.ENOSPC, match: writesTo(".sst", ".blob")}
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(vfs.NewMem(), inj), MemTableSize: 1 << 20,
		Logger: zaptest.NewLogger(t)})
	defer s.Close()
	const n = 200
	for i := range n {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	inj.on.Store(true)
	// Rewrite messages in place (settlement-like writes, admitted while
	// the flush is blocked) until Pebble stalls: the rewrite caught in
	// the stall waits, and returns once space is back.
	stop := make(chan struct{})
	rewrites := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				rewrites <- nil
				return
			default:
			}
			b := &storage.Batch{Sync: true}
			b.Set(msgKey(i%n), msgBody(i%n))
			if err := s.Apply(b); err != nil && !s.Stalled() {
				rewrites <- fmt.Errorf("rewrite %d before the stall: %w", i, err)
				return
			}
		}
	}()
	waitFor(t, "Pebble to stall writes", s.Stalled)
	settle := &storage.Batch{Sync: true}
	settle.Delete(msgKey(0))
	if err := s.Apply(settle); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("settlement during a stall behind a blocked flush: Apply = %v, want ErrNoSpace", err)
	}
	inj.on.Store(false)
	close(stop)
	if err := <-rewrites; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Health to clear", func() bool { return s.Health() == nil && !s.Stalled() })
	if err := s.Apply(settle); err != nil {
		t.Fatalf("settlement after space returned: %v", err)
	}
}

// A failed fsync of an sstable is one Pebble survives: it drops the file
// and flushes again. The store lets it, pacing the retries (Pebble alone
// retries at once, in a loop) and refusing writes that grow the store
// until a flush goes through.
func TestFailedFlushFsyncIsRetriedAndPaced(t *testing.T) {
	inj := &injector{err: syscall.EIO, match: syncsOf(".sst")}
	mem := vfs.NewMem()
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(mem, inj), Logger: zaptest.NewLogger(t)})
	defer s.Close()
	for i := range 50 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	inj.on.Store(true)
	if err := s.FlushAsync(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Health to report the failing flush", func() bool { return errors.Is(s.Health(), storage.ErrUnavailable) })
	if err := s.Apply(msgBatch(50)); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("send while flushes fail: Apply = %v, want ErrUnavailable", err)
	}
	settle := &storage.Batch{Sync: true}
	settle.Delete(msgKey(0))
	if err := s.Apply(settle); err != nil {
		t.Fatalf("settlement while flushes fail: %v", err)
	}
	waitFor(t, "a few failed fsyncs", func() bool { return inj.hits.Load() >= 3 })
	start, hits := time.Now(), inj.hits.Load()
	waitFor(t, "a few more", func() bool { return inj.hits.Load() >= hits+3 })
	rate := float64(inj.hits.Load()-hits) / time.Since(start).Seconds()
	t.Logf("%.0f failed flushes a second", rate)
	names, _ := mem.List("db")
	outputs := 0
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") {
			outputs++
		}
	}
	if outputs > 2 { // at most the attempt in progress
		t.Errorf("failed flushes left files behind: %v", names)
	}
	if rate > 200 {
		t.Errorf("%.0f failed flushes a second: the retries are not paced", rate)
	}
	inj.on.Store(false)
	waitFor(t, "Health to clear", func() bool { return s.Health() == nil })
	if err := s.Apply(msgBatch(50)); err != nil {
		t.Fatalf("send once flushes work again: %v", err)
	}
}

// A failed fsync of a blob file is one Pebble does not survive (v2.1 then
// dereferences nil and the process dies). The store parks it like a failed
// log fsync: no crash, writes refused until restart, reads go on, and
// Close returns at once.
func TestFailedBlobFsyncStopsWritesWithoutACrash(t *testing.T) {
	inj := &injector{err: syscall.EIO, match: syncsOf(".blob")}
	s := mustOpen(t, "db", pebblestore.Options{FS: errorfs.Wrap(vfs.NewMem(), inj), Logger: zaptest.NewLogger(t)})
	for i := range 50 {
		if err := s.Apply(msgBatch(i)); err != nil {
			t.Fatal(err)
		}
	}
	inj.on.Store(true)
	if err := s.FlushAsync(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Health to report the failed fsync", func() bool { return errors.Is(s.Health(), storage.ErrUnavailable) })
	if err := s.Apply(msgBatch(50)); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("send after a failed blob fsync: Apply = %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(msgKey(7)); err != nil {
		t.Fatalf("read after a failed blob fsync: %v", err)
	}
	if err := s.Close(); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Close = %v, want ErrUnavailable", err)
	}
}
