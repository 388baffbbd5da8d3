package pebblestore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// BenchmarkWALMarkBlindSpot measures how far the store's synced-offset
// mark trails the write-ahead log under synced sends from 16 writers: the
// bytes of acknowledged records a log cut short could lose without the
// mark showing it, and for how long a record stays so exposed. It samples
// the mark every 200 µs and reports the largest lag seen, in bytes
// (blind-B) and milliseconds (blind-ms), as a crash of the process sees
// the mark (written) and as a crash of the machine does (fsynced).
func BenchmarkWALMarkBlindSpot(b *testing.B) {
	s, _ := openBenchStore(b)
	value := make([]byte, benchValueSize)
	type sample struct {
		at     time.Time
		synced int64
	}
	var stop atomic.Bool
	type lagStat struct {
		bytes   int64
		dur     time.Duration
		pending []sample
	}
	var seen, durable lagStat
	track := func(l *lagStat, now time.Time, synced, covered int64) {
		l.bytes = max(l.bytes, synced-covered)
		l.pending = append(l.pending, sample{now, synced})
		i := 0
		for ; i < len(l.pending) && l.pending[i].synced <= covered; i++ {
			l.dur = max(l.dur, now.Sub(l.pending[i].at))
		}
		l.pending = l.pending[i:]
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			now := time.Now()
			synced, written, fsynced := s.mark.lag()
			track(&seen, now, synced, written)
			track(&durable, now, synced, fsynced)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	runWriters(b, 16, new(atomic.Int64), func() func(int) error {
		k := newBenchKeys()
		var batch storage.Batch
		return func(i int) error {
			k.set(i)
			batch.Reset()
			batch.Sync = true
			batch.Set(k.msg, value)
			return s.Apply(&batch)
		}
	})
	stop.Store(true)
	<-done
	b.ReportMetric(float64(seen.bytes), "blind-B")
	b.ReportMetric(float64(seen.dur.Microseconds())/1000, "blind-ms")
	b.ReportMetric(float64(durable.bytes), "blind-fsynced-B")
	b.ReportMetric(float64(durable.dur.Microseconds())/1000, "blind-fsynced-ms")
}

// BenchmarkWALMarkWrite is what the mark costs each fsync of the log: one
// 32-byte pwrite of the open mark file (noteSynced), on a real directory.
func BenchmarkWALMarkWrite(b *testing.B) {
	dir := b.TempDir()
	m := &walMark{fs: vfs.Default, path: vfs.Default.PathJoin(dir, walMarkName), log: zap.NewNop()}
	m.start()
	defer m.stopWriter()
	var n int64
	for b.Loop() {
		n += 4096
		m.noteSynced(1, n)
	}
}
