package amqpserver

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// benchStore is a store for a benchmark and, for Pebble, a counter of its
// WAL fsyncs.
type benchStore struct {
	storage.Store
	syncs *atomic.Int64 // nil for memstore
}

// benchStores are the stores the benchmarks run on.
var benchStores = []struct {
	name string
	open func(b *testing.B) benchStore
}{
	{"mem", func(*testing.B) benchStore { return benchStore{Store: memstore.New()} }},
	{"pebble", func(b *testing.B) benchStore {
		syncs := new(atomic.Int64)
		st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{WALSyncs: syncs})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return benchStore{Store: st, syncs: syncs}
	}},
}

// benchMeter measures a timed benchmark section: it reports msg/s, the
// process's CPU use as a percentage of one core and per message (client
// and server together, since go-amqp runs in the same process; CPU per
// message is less disturbed than msg/s by other load on the machine) and,
// on Pebble, messages per WAL fsync, the direct measure of group commit.
type benchMeter struct {
	b     *testing.B
	st    benchStore
	start time.Time
	cpu   time.Duration
	syncs int64
}

// startMeter resets the benchmark timer and starts measuring.
func startMeter(b *testing.B, st benchStore) *benchMeter {
	b.ReportAllocs()
	b.ResetTimer()
	m := &benchMeter{b: b, st: st, start: time.Now(), cpu: processCPU()}
	if st.syncs != nil {
		m.syncs = st.syncs.Load()
	}
	return m
}

// stop stops the timer and reports the metrics for n messages.
func (m *benchMeter) stop(n int) {
	el := time.Since(m.start)
	cpu := processCPU() - m.cpu
	m.b.StopTimer()
	m.b.ReportMetric(float64(n)/el.Seconds(), "msg/s")
	m.b.ReportMetric(100*cpu.Seconds()/el.Seconds(), "cpu%")
	m.b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/msg")
	if m.st.syncs != nil {
		if s := m.st.syncs.Load() - m.syncs; s > 0 {
			m.b.ReportMetric(float64(n)/float64(s), "msg/fsync")
		}
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
