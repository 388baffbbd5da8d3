package amqpserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// BenchmarkCoreBaseline does the work of the AMQP benchmarks straight on
// the core, with the same store, queue, message size and number of
// messages in flight (benchInFlight concurrent callers), so that the cost
// of the AMQP front is the ratio of the two in one run.
func BenchmarkCoreBaseline(b *testing.B) {
	body := make([]byte, 1024)
	for _, st := range benchStores {
		b.Run("send/"+st.name, func(b *testing.B) {
			st := st.open(b)
			_, br := newBenchServer(b, st)
			m := startMeter(b, st)
			runCallers(b, func() error {
				_, err := br.Send(context.Background(), "q", &core.Message{Body: body})
				return err
			})
			m.stop(b.N)
		})
		b.Run("receive-complete/"+st.name, func(b *testing.B) {
			st := st.open(b)
			_, br := newBenchServer(b, st)
			for sent := 0; sent < b.N; sent += 500 {
				msgs := make([]*core.Message, min(b.N-sent, 500))
				for i := range msgs {
					msgs[i] = &core.Message{Body: body}
				}
				if _, err := br.Send(b.Context(), "q", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			m := startMeter(b, st)
			runCallers(b, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				msgs, err := br.Receive(ctx, "q", core.ReceiveOptions{})
				if err != nil {
					return err
				}
				if len(msgs) != 1 {
					return fmt.Errorf("receive got %d messages", len(msgs))
				}
				return br.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete})
			})
			m.stop(b.N)
		})
	}
}

// runCallers runs op b.N times over benchInFlight goroutines.
func runCallers(b *testing.B, op func() error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	for range benchInFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					once.Do(func() { failed = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}
