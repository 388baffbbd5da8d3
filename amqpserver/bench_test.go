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
)

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

// benchInFlight is how many messages the benchmarks keep in flight: sends
// awaiting their disposition, completions awaiting their answer, or, in
// the core baselines, concurrent callers.
const benchInFlight = 256

// BenchmarkAMQPSendPipelined sends 1 KiB messages from 256 goroutines
// sharing one go-amqp sender link, each waiting for its disposition.
func BenchmarkAMQPSendPipelined(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			st := st.open(b)
			addr, _ := newBenchServer(b, st)
			snd, err := benchSession(b, addr).NewSender(b.Context(), "q", nil)
			if err != nil {
				b.Fatal(err)
			}
			m := startMeter(b, st)
			sendConcurrently(b, []*amqp.Sender{snd}, benchInFlight)
			m.stop(b.N)
		})
	}
}

// sendConcurrently sends b.N 1 KiB messages with perSender goroutines on
// each sender, every one waiting for its disposition before the next.
func sendConcurrently(b *testing.B, snds []*amqp.Sender, perSender int) {
	body := make([]byte, 1024)
	work := make(chan struct{}, len(snds)*perSender)
	var wg sync.WaitGroup
	for _, snd := range snds {
		for range perSender {
			wg.Go(func() {
				for range work {
					if err := snd.Send(b.Context(), amqp.NewMessage(body), nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
}

// BenchmarkAMQPReceiveComplete receives 1 KiB messages in peek-lock mode
// with 500 credits and completes each, 256 completions in flight.
func BenchmarkAMQPReceiveComplete(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			st := st.open(b)
			addr, br := newBenchServer(b, st)
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
			sem := make(chan struct{}, benchInFlight)
			var wg sync.WaitGroup
			meter := startMeter(b, st)
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
			meter.stop(b.N)
		})
	}
}
