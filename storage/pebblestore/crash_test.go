package pebblestore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// crashBatch is the batch number n of writer w: three keys whose values
// are derived from (w, n), so a reader can check them without a record of
// what was written. Values span several 4 KiB blocks, the unit in which a
// crashable FS drops unsynced data, so a crash can tear a batch's WAL
// record in the middle.
func crashBatch(w, n int, sync bool) *storage.Batch {
	b := &storage.Batch{Sync: sync}
	for i := range 3 {
		b.Set(crashKey(w, n, i), crashValue(w, n, i))
	}
	return b
}

func crashKey(w, n, i int) []byte { return fmt.Appendf(nil, "w%02d/%06d/%d", w, n, i) }

func crashValue(w, n, i int) []byte {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(w))
	binary.LittleEndian.PutUint64(seed[8:], uint64(n))
	binary.LittleEndian.PutUint64(seed[16:], uint64(i))
	r := rand.NewChaCha8(seed)
	v := make([]byte, 1500+r.Uint64()%1500)
	_, _ = r.Read(v) // never fails
	return v
}

// batchState reports whether batch (w, n) is wholly present (true), wholly
// absent (false), or torn (error).
func batchState(s storage.Store, w, n int) (bool, error) {
	present := 0
	for i := range 3 {
		v, err := s.Get(crashKey(w, n, i))
		switch {
		case errors.Is(err, storage.ErrNotFound):
			continue
		case err != nil:
			return false, err
		case !bytes.Equal(v, crashValue(w, n, i)):
			return false, fmt.Errorf("batch w%d/%d key %d holds a wrong value (%d bytes)", w, n, i, len(v))
		}
		present++
	}
	switch present {
	case 0:
		return false, nil
	case 3:
		return true, nil
	}
	return false, fmt.Errorf("batch w%d/%d is torn: %d of 3 keys present", w, n, present)
}

// crashClone simulates a crash of fs now, keeping each unsynced 4 KiB
// block with probability percent/100.
func crashClone(fs *vfs.MemFS, percent int, seed uint64) *vfs.MemFS {
	return fs.CrashClone(vfs.CrashCloneCfg{
		UnsyncedDataPercent: percent,
		RNG:                 rand.New(rand.NewPCG(seed, seed)),
	})
}

// TestCrashKeepsSyncedBatches crashes the file system at several moments
// while writers commit synced batches concurrently, and checks that each
// crash image holds every batch whose Apply had returned before the crash,
// and no torn batch.
func TestCrashKeepsSyncedBatches(t *testing.T) {
	const writers = 8
	fs := vfs.NewCrashableMem()
	// A small memtable makes flushes, sstables and WAL rotation part of
	// what the crash interrupts.
	s := mustOpen(t, "db", pebblestore.Options{FS: fs, MemTableSize: 1 << 20})

	var mu sync.Mutex
	acked := make([]int, writers) // batches acknowledged per writer; guarded by mu
	total := 0                    // sum of acked; guarded by mu
	progress := make(chan int, writers*1000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := s.Apply(crashBatch(w, n, true)); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[w] = n + 1
				total++
				t := total
				mu.Unlock()
				select {
				case progress <- t:
				default:
				}
			}
		})
	}

	type image struct {
		fs    *vfs.MemFS
		acked []int
	}
	var images []image
	crashAt := []struct{ after, percent int }{{30, 0}, {100, 30}, {200, 70}, {300, 100}}
	for i, c := range crashAt {
		for got := range progress {
			if got >= c.after {
				break
			}
		}
		mu.Lock()
		before := append([]int(nil), acked...)
		mu.Unlock()
		images = append(images, image{crashClone(fs, c.percent, uint64(i)), before})
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Apply: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for i, img := range images {
		t.Run(fmt.Sprintf("crash%d", i), func(t *testing.T) {
			r := mustOpen(t, "db", pebblestore.Options{FS: img.fs})
			defer r.Close()
			for w := range writers {
				for n := 0; ; n++ {
					present, err := batchState(r, w, n)
					if err != nil {
						t.Fatal(err)
					}
					if n < img.acked[w] && !present {
						t.Fatalf("writer %d batch %d was acknowledged before the crash but is gone", w, n)
					}
					if !present && n >= img.acked[w] {
						break
					}
				}
			}
		})
	}
}

// TestCrashTearsNoBatch writes synced then unsynced batches from one
// writer and crashes with part of the unsynced tail lost. Every synced batch
// must survive; of the rest, each batch is present whole or not at all, and
// what survives is a prefix of the commit order.
func TestCrashTearsNoBatch(t *testing.T) {
	const synced, total = 40, 150
	fs := vfs.NewCrashableMem()
	// Big enough that no flush syncs the unsynced tail behind our back.
	s := mustOpen(t, "db", pebblestore.Options{FS: fs, MemTableSize: 64 << 20})
	for n := range total {
		if err := s.Apply(crashBatch(0, n, n < synced)); err != nil {
			t.Fatal(err)
		}
	}
	var clones []*vfs.MemFS
	for _, percent := range []int{0, 10, 50, 90} {
		for seed := range uint64(2) {
			clones = append(clones, crashClone(fs, percent, seed))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for i, fs := range clones {
		r := mustOpen(t, "db", pebblestore.Options{FS: fs})
		survived := 0
		for n := range total {
			present, err := batchState(r, 0, n)
			if err != nil {
				t.Fatalf("clone %d: %v", i, err)
			}
			if present {
				if survived != n {
					t.Fatalf("clone %d: batch %d survived but batch %d did not", i, n, survived)
				}
				survived++
			}
		}
		if survived < synced {
			t.Fatalf("clone %d: %d batches survived, want at least the %d synced", i, survived, synced)
		}
		t.Logf("clone %d: %d of %d batches survived", i, survived, total)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
