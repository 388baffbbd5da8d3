package pebblestore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestLogReuseNeverDeadlocksACrashImage: Pebble reuses old log files
// through faultFS.ReuseForWrite while the crash tests take crash images
// (MemFS.CrashClone) from other goroutines. MemFS's own ReuseForWrite
// takes its clone lock twice for reading, so a CrashClone arriving
// between the two waits for the first while the second waits for it: a
// test hung until its timeout. faultFS renames and opens in two calls, as
// the default file system does, each taking the lock once.
func TestLogReuseNeverDeadlocksACrashImage(t *testing.T) {
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	fs := &faultFS{FS: mem, faults: newFaults(), storeDir: "db"}
	f, err := fs.Create("db/000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= 20000; i++ {
			f, err := fs.ReuseForWrite(fmt.Sprintf("db/%06d.log", i), fmt.Sprintf("db/%06d.log", i+1), vfs.WriteCategoryUnspecified)
			if err == nil {
				_, err = f.Write([]byte("record"))
			}
			if err == nil {
				err = f.Close()
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("gave up after a minute: reusing a log file deadlocked with a crash image")
	}
}
