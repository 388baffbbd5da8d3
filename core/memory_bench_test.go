package core_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"

	"github.com/omnibusmq/omnibus/core"
)

var memoryN = flag.Int("memory.n", 200_000, "messages stored by BenchmarkIndexMemory")

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkIndexMemory measures what the core keeps in memory per stored
// message beyond the hand-over cache (cmd/omnibus/README.md, Limits): a backlog of
// -memory.n messages of 1 KiB on pebblestore, with duplicate detection
// (each id remembered) and with every message peek-locked (a slow
// consumer). Each is reported in bytes of live heap per message; the
// loop only repeats the measurement.
func BenchmarkIndexMemory(b *testing.B) {
	n := *memoryN
	for _, c := range []struct {
		name   string
		dedup  bool
		locked bool
	}{{"backlog", false, false}, {"backlog+dedup", true, false}, {"backlog+locked", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			br, _ := benchEnv(b)
			mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q", RequiresDuplicateDetection: c.dedup, MaxSizeInMegabytes: 10 << 10})
			before := liveHeap()
			for i := 0; i < n; i += 1000 {
				msgs := make([]*core.Message, min(1000, n-i))
				for j := range msgs {
					msgs[j] = &core.Message{Body: payload, MessageID: fmt.Sprintf("%032d", i+j)}
				}
				if _, err := br.Send(context.Background(), "q", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			if c.locked {
				for got := 0; got < n; {
					msgs, err := br.Receive(context.Background(), "q", core.ReceiveOptions{Max: 1000})
					if err != nil {
						b.Fatal(err)
					}
					got += len(msgs)
				}
			}
			b.ResetTimer()
			var per float64
			for range b.N {
				per = float64(liveHeap()-before-br.CacheBytes()) / float64(n)
			}
			b.ReportMetric(per, "B/msg")
			b.ReportMetric(float64(br.CacheBytes())/(1<<20), "cache-MiB")
		})
	}
}
