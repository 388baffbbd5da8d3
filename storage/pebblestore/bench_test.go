package pebblestore

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/omnibusmq/omnibus/storage"
)

// The benchmarks below write what a durable message send writes: a 1 KiB
// message under a short key plus a ~64-byte index key, in one synced batch.
// They run with 1, 16 and 64 concurrent writers on a real directory, so
// they measure fsync cost and how well concurrent commits share fsyncs.
// BenchmarkRawPebbleSyncWrite talks to Pebble directly and is the physical
// limit ("raw Pebble rate") that the store and the core are measured
// against; BenchmarkStoreApplySync adds this package's layer.

var benchWriters = []int{1, 16, 64}

const (
	benchValueSize = 1024
	benchIndexLen  = 64
)

// benchKeys holds one writer's key buffers, rewritten for each message so
// that key building does not count as allocation.
type benchKeys struct {
	msg, idx []byte
}

func newBenchKeys() *benchKeys {
	k := &benchKeys{
		msg: []byte("q/orders/m/\x00\x00\x00\x00\x00\x00\x00\x00"),
		idx: make([]byte, benchIndexLen),
	}
	copy(k.idx, "q/orders/x/some-property-index/")
	return k
}

// set points both keys at message i.
func (k *benchKeys) set(i int) {
	binary.BigEndian.PutUint64(k.msg[len(k.msg)-8:], uint64(i))
	binary.BigEndian.PutUint64(k.idx[len(k.idx)-8:], uint64(i))
}

// runWriters spreads b.N messages over the given number of goroutines.
// newWorker is called once per goroutine and returns its send function.
// It reports messages per second as msg/s, and the process's CPU time
// (user and system, Pebble's background work included) per message as
// cpu-µs/msg, which a machine busy with other work disturbs less.
// If syncs is not nil it also reports messages per WAL fsync as msg/fsync.
func runWriters(b *testing.B, writers int, syncs *atomic.Int64, newWorker func() func(i int) error) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	workers := make([]func(int) error, writers)
	for w := range workers {
		workers[w] = newWorker()
	}
	b.ResetTimer()
	syncsBefore, cpuBefore := syncs.Load(), processCPU(b)
	for _, send := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				if err := send(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64((processCPU(b)-cpuBefore).Nanoseconds())/1e3/float64(b.N), "cpu-µs/msg")
	if n := syncs.Load() - syncsBefore; n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "msg/fsync")
	}
}

// openBenchStore opens a store on a real directory, counting WAL fsyncs.
func openBenchStore(b *testing.B) (*Store, *atomic.Int64) {
	b.Helper()
	syncs := new(atomic.Int64)
	s, err := Open(b.TempDir(), Options{WALSyncs: syncs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, syncs
}

func BenchmarkRawPebbleSyncWrite(b *testing.B) {
	value := make([]byte, benchValueSize)
	index := []byte("12345678")
	for _, writers := range benchWriters {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			syncs := new(atomic.Int64)
			dir := b.TempDir()
			opts, err := Options{WALSyncs: syncs}.pebbleOptions(dir)
			if err != nil {
				b.Fatal(err)
			}
			db, err := pebble.Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			runWriters(b, writers, syncs, func() func(int) error {
				k := newBenchKeys()
				return func(i int) error {
					k.set(i)
					pb := db.NewBatch()
					defer pb.Close()
					if err := pb.Set(k.msg, value, nil); err != nil {
						return err
					}
					if err := pb.Set(k.idx, index, nil); err != nil {
						return err
					}
					return pb.Commit(pebble.Sync)
				}
			})
		})
	}
}

func BenchmarkStoreApplySync(b *testing.B) {
	value := make([]byte, benchValueSize)
	index := []byte("12345678")
	for _, writers := range benchWriters {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, syncs := openBenchStore(b)
			runWriters(b, writers, syncs, func() func(int) error {
				k := newBenchKeys()
				var batch storage.Batch
				return func(i int) error {
					k.set(i)
					batch.Reset()
					batch.Sync = true
					batch.Set(k.msg, value)
					batch.Set(k.idx, index)
					return s.Apply(&batch)
				}
			})
		})
	}
}

// BenchmarkStoreSendComplete writes each message and then deletes it, each
// in its own synced batch: a send followed by a receive-and-complete. One
// op is one message, so two commits.
func BenchmarkStoreSendComplete(b *testing.B) {
	value := make([]byte, benchValueSize)
	index := []byte("12345678")
	for _, writers := range benchWriters {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, syncs := openBenchStore(b)
			runWriters(b, writers, syncs, func() func(int) error {
				k := newBenchKeys()
				var batch storage.Batch
				return func(i int) error {
					k.set(i)
					batch.Reset()
					batch.Sync = true
					batch.Set(k.msg, value)
					batch.Set(k.idx, index)
					if err := s.Apply(&batch); err != nil {
						return err
					}
					batch.Reset()
					batch.Sync = true
					batch.Delete(k.msg)
					batch.Delete(k.idx)
					return s.Apply(&batch)
				}
			})
		})
	}
}

// BenchmarkStoreApplyInMemory applies unsynced 1 KiB batches to a store in
// memory: no disk, so it shows the CPU the store's own layer costs per
// commit (the commit handed to a kept goroutine, see commits.go) without
// the noise of fsyncs.
func BenchmarkStoreApplyInMemory(b *testing.B) {
	value := make([]byte, benchValueSize)
	index := []byte("12345678")
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, err := Open("bench", Options{InMemory: true, LazySyncDelay: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			runWriters(b, writers, new(atomic.Int64), func() func(int) error {
				k := newBenchKeys()
				var batch storage.Batch
				return func(i int) error {
					k.set(i)
					batch.Reset()
					batch.Set(k.msg, value)
					batch.Set(k.idx, index)
					return s.Apply(&batch)
				}
			})
		})
	}
}
