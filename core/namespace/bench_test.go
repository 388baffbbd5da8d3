package namespace_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// Costs of namespaces (cmd/omnibus/README.md, "Namespaces: costs"):
//
//	go test ./core/namespace -run '^$' -bench . -benchtime 3x   # start-up and memory
//	go test ./core/namespace -run '^$' -bench Send -benchtime 5s  # per message

// openBench opens a registry on st with the real clock.
func openBench(b *testing.B, st storage.Store) *namespace.Registry {
	b.Helper()
	r, err := namespace.Open(namespace.Config{Store: st, DefaultName: "sbemulatorns",
		RootRules: []sas.Rule{{KeyName: rootName, Key: rootKey, Rights: sas.Manage}},
		NewBroker: func(name string, s storage.Store, c clock.Clock) (*core.Broker, error) {
			return core.New(core.Config{Store: s, Clock: c, Namespace: name})
		}})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// heapInUse returns the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkStartup100x50: start-up (open Pebble, recover every
// namespace) of a data directory holding 100 namespaces of 50 queues
// each, 10 messages in each queue; and the memory one such namespace
// holds once open (bytes/namespace), and one without entities
// (bytes/empty-namespace).
func BenchmarkStartup100x50(b *testing.B) {
	const namespaces, queues, msgs = 100, 50, 10
	dir := b.TempDir()
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := openBench(b, st)
	ctx := context.Background()
	for i := range namespaces {
		ns, err := r.Create(ctx, fmt.Sprintf("ns%d", i), nil)
		if err != nil {
			b.Fatal(err)
		}
		for q := range queues {
			name := fmt.Sprintf("q%d", q)
			if _, err := ns.Broker().CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: name}); err != nil {
				b.Fatal(err)
			}
			batch := make([]*core.Message, msgs)
			for j := range batch {
				batch[j] = &core.Message{Body: []byte("a small message body")}
			}
			if _, err := ns.Broker().Send(ctx, name, batch...); err != nil {
				b.Fatal(err)
			}
		}
	}
	r.Close()
	st.Close()

	var perNS float64
	for b.Loop() {
		st, err := pebblestore.Open(dir, pebblestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		r := openBench(b, st)
		if r.Len() != namespaces+1 {
			b.Fatalf("%d namespaces after start-up, want %d", r.Len(), namespaces+1)
		}
		b.StopTimer()
		perNS = float64(heapInUse()-before) / namespaces
		r.Close()
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(perNS, "bytes/namespace")

	// An empty namespace, on memstore (no Pebble caches in the figure).
	mr := openBench(b, memstore.New())
	defer mr.Close()
	before := heapInUse()
	for i := range namespaces {
		if _, err := mr.Create(ctx, fmt.Sprintf("e%d", i), nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(heapInUse()-before)/namespaces, "bytes/empty-namespace")
}

// BenchmarkSend compares a durable 1 KiB send in the default namespace
// (unprefixed keys) and in another (keys through prefixstore): one sender
// on memstore (the CPU a send costs), 64 concurrent senders on Pebble
// (fsync and group commit).
func BenchmarkSend(b *testing.B) {
	payload := make([]byte, 1024)
	for _, store := range []string{"memstore", "pebble"} {
		for _, where := range []string{"default", "namespace"} {
			b.Run(store+"/"+where, func(b *testing.B) {
				var st storage.Store = memstore.New()
				if store == "pebble" {
					ps, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
					if err != nil {
						b.Fatal(err)
					}
					st = ps
				}
				r := openBench(b, st)
				b.Cleanup(func() { r.Close(); st.Close() })
				ns := r.Default()
				if where == "namespace" {
					var err error
					if ns, err = r.Create(context.Background(), "other", nil); err != nil {
						b.Fatal(err)
					}
				}
				br := ns.Broker()
				if _, err := br.CreateEntity(context.Background(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var next atomic.Int64
				var wg sync.WaitGroup
				var failed atomic.Value
				b.ResetTimer()
				start := time.Now()
				senders := 64
				if store == "memstore" {
					senders = 1
				}
				for range senders {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if _, err := br.Send(context.Background(), "q", &core.Message{Body: payload}); err != nil {
								failed.Store(err)
								return
							}
						}
					})
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
			})
		}
	}
}
