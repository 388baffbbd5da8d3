package amqpserver

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// benchStores are the stores the benchmarks run on.
var benchStores = []struct {
	name string
	open func(b *testing.B) storage.Store
}{
	{"mem", func(*testing.B) storage.Store { return memstore.New() }},
	{"pebble", func(b *testing.B) storage.Store {
		st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}},
}

// newBenchServer serves a broker on st (real clock, no authentication)
// with a queue "q" and returns its address and the broker.
func newBenchServer(b *testing.B, st storage.Store) (string, *core.Broker) {
	b.Helper()
	br, err := core.New(core.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	if _, err := br.CreateEntity(b.Context(), core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 5 * time.Minute}); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Broker: br, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return l.Addr().String(), br
}

func benchSession(b *testing.B, addr string) *amqp.Session {
	b.Helper()
	c, err := amqp.Dial(b.Context(), "amqp://"+addr, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	s, err := c.NewSession(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAMQPSendPipelined sends 1 KiB messages from 256 goroutines
// sharing one go-amqp sender link, each waiting for its disposition.
func BenchmarkAMQPSendPipelined(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			addr, _ := newBenchServer(b, st.open(b))
			snd, err := benchSession(b, addr).NewSender(b.Context(), "q", nil)
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 1024)
			const workers = 256
			work := make(chan struct{}, workers)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range workers {
				wg.Go(func() {
					for range work {
						if err := snd.Send(b.Context(), amqp.NewMessage(body), nil); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
		})
	}
}

// BenchmarkAMQPReceiveComplete receives 1 KiB messages in peek-lock mode
// with 500 credits and completes each, 256 completions in flight.
func BenchmarkAMQPReceiveComplete(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			addr, br := newBenchServer(b, st.open(b))
			body := make([]byte, 1024)
			for sent := 0; sent < b.N; {
				n := min(b.N-sent, 500)
				msgs := make([]*core.Message, n)
				for i := range msgs {
					msgs[i] = &core.Message{Body: body}
				}
				if _, err := br.Send(b.Context(), "q", msgs...); err != nil {
					b.Fatal(err)
				}
				sent += n
			}
			r, err := benchSession(b, addr).NewReceiver(b.Context(), "q", &amqp.ReceiverOptions{
				Credit: 500, SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(),
			})
			if err != nil {
				b.Fatal(err)
			}
			sem := make(chan struct{}, 256)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				m, err := r.Receive(b.Context(), nil)
				if err != nil {
					b.Fatal(err)
				}
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if err := r.AcceptMessage(b.Context(), m); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
		})
	}
}
