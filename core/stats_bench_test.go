package core_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// BenchmarkStatsCost is what Config.Stats costs the core's message path
// with the disk out of the way (memstore, no fsync), so that the counting
// is as large a share of the work as it can be. Brokers with statistics
// off and on take turns in rounds of 1,000 messages (ABBA), so that
// whatever else the machine does falls on both alike; each round sends,
// receives peek-locked and completes, one message at a time ("single")
// or 100 at a time as an AMQP link with credit does ("batch100"). It
// reports the process's CPU time per message with statistics off and on
// (getrusage: the broker's goroutines and the garbage collector
// included) and the difference in percent:
//
//	go test ./core -run '^$' -bench StatsCost -benchtime 200000x
func BenchmarkStatsCost(b *testing.B) {
	for _, batch := range []int{1, 100} {
		name := "single"
		if batch > 1 {
			name = fmt.Sprintf("batch%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			// Two brokers of each kind, created off, on, on, off: the first
			// made can run a few percent slower or faster than the last
			// (where its memory landed), whatever its settings.
			var brokers [4]*core.Broker
			stats := [4]bool{false, true, true, false}
			for i := range brokers {
				br, err := core.New(core.Config{Store: memstore.New(), Clock: clock.Real{}, Stats: stats[i]})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { br.Close() })
				mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q"})
				brokers[i] = br
			}
			const round = 1000
			var cpu [2]time.Duration // off, on
			var msgs [2]int
			b.ResetTimer()
			for r := 0; msgs[0] < b.N; r++ {
				for _, i := range [4]int{0, 1, 2, 3} {
					if r%2 == 1 {
						i = 3 - i
					}
					mode := 0
					if stats[i] {
						mode = 1
					}
					t0 := processCPU(b)
					cycle(b, brokers[i], batch, round)
					cpu[mode] += processCPU(b) - t0
					msgs[mode] += round
				}
			}
			b.StopTimer()
			off := float64(cpu[0].Nanoseconds()) / float64(msgs[0])
			on := float64(cpu[1].Nanoseconds()) / float64(msgs[1])
			b.ReportMetric(off, "cpu-ns/msg-off")
			b.ReportMetric(on, "cpu-ns/msg-on")
			b.ReportMetric((on-off)/off*100, "%-more")
		})
	}
}

// cycle sends, receives and completes n messages on br's queue q, batch
// at a time.
func cycle(b *testing.B, br *core.Broker, batch, n int) {
	ctx := context.Background()
	msgs := make([]*core.Message, batch)
	toks := make([]core.LockToken, 0, batch)
	for done := 0; done < n; done += batch {
		for i := range msgs {
			msgs[i] = &core.Message{Body: payload}
		}
		if _, err := br.Send(ctx, "q", msgs...); err != nil {
			b.Fatal(err)
		}
		got, err := br.Receive(ctx, "q", core.ReceiveOptions{Max: batch})
		if err != nil || len(got) != batch {
			b.Fatalf("received %d of %d: %v", len(got), batch, err)
		}
		toks = toks[:0]
		for _, m := range got {
			toks = append(toks, m.LockToken)
		}
		for _, err := range br.CompleteMany("q", toks, true) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
