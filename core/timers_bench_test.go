package core_test

import (
	"context"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// BenchmarkLockCycle is the CPU cost of a peek-lock delivery and its
// completion without the store's fsync (memstore): lock, lock-expiry
// timer entry, settlement. timer-entries is what the queue's timer heap
// holds afterwards.
func BenchmarkLockCycle(b *testing.B) {
	for _, max := range []int{1, 100} {
		b.Run(map[int]string{1: "one", 100: "batch-100"}[max], func(b *testing.B) {
			env := coretest.New(b)
			br := env.Broker
			env.MustCreate(b, core.Entity{Kind: core.KindQueue, Name: "q"})
			const chunk = 1000
			for i := 0; i < b.N; i += chunk {
				msgs := make([]*core.Message, min(chunk, b.N-i))
				for j := range msgs {
					msgs[j] = &core.Message{Body: payload}
				}
				env.MustSend(b, "q", msgs...)
			}
			ctx := context.Background()
			toks := make([]core.LockToken, 0, max)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				msgs, err := br.Receive(ctx, "q", core.ReceiveOptions{Max: max})
				if err != nil || len(msgs) == 0 {
					b.Fatalf("receive: %d, %v", len(msgs), err)
				}
				toks = toks[:0]
				for _, m := range msgs {
					toks = append(toks, m.LockToken)
				}
				for _, err := range br.CompleteMany("q", toks, true) {
					if err != nil {
						b.Fatal(err)
					}
				}
				done += len(msgs)
			}
			b.StopTimer()
			n := core.TimerEntries(br, "q")
			b.ReportMetric(float64(n), "timer-entries")
		})
	}
}
