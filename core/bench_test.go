package core_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// Benchmarks of the core on storage/pebblestore in a temp dir (real
// fsyncs), 1 KiB messages. Each reports msg/s; compare with
// BenchmarkRawStoreSyncWrite, the same writes made straight on the store.
//
//	go test ./core -run '^$' -bench . -benchtime 3s

var recoveryN = flag.Int("recovery.n", 100_000, "messages queued for BenchmarkRecovery")

const benchSenders = 64

var payload = make([]byte, 1024)

func openBenchStore(b *testing.B, dir string) *pebblestore.Store {
	b.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func newBenchBroker(b *testing.B, st storage.Store) *core.Broker {
	b.Helper()
	br, err := core.New(core.Config{Store: st, Clock: clock.Real{}})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// benchEnv is a broker on a fresh pebblestore, torn down with the benchmark.
func benchEnv(b *testing.B) (*core.Broker, *pebblestore.Store) {
	b.Helper()
	st := openBenchStore(b, b.TempDir())
	br := newBenchBroker(b, st)
	b.Cleanup(func() {
		br.Close()
		st.Close()
	})
	return br, st
}

func mustCreateB(b *testing.B, br *core.Broker, e core.Entity) {
	b.Helper()
	if _, err := br.CreateEntity(context.Background(), e); err != nil {
		b.Fatal(err)
	}
}

// runConcurrent runs op b.N times over n goroutines and reports msg/s.
func runConcurrent(b *testing.B, n int, op func(i int64) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for range n {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := op(i); err != nil {
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
}

// BenchmarkRawStoreSyncWrite is the baseline: what a durable send writes
// (a 1 KiB body record and a small state record, one synced batch), made
// directly on pebblestore by 64 concurrent writers.
func BenchmarkRawStoreSyncWrite(b *testing.B) {
	st := openBenchStore(b, b.TempDir())
	b.Cleanup(func() { st.Close() })
	state := make([]byte, 24)
	runConcurrent(b, benchSenders, func(i int64) error {
		k := binary.BigEndian.AppendUint64([]byte{'B', 0, 0, 0, 0, 0, 0, 0, 1}, uint64(i))
		s := binary.BigEndian.AppendUint64([]byte{'Q', 0, 0, 0, 0, 0, 0, 0, 1}, uint64(i))
		batch := storage.Batch{Sync: true}
		batch.Set(k, payload)
		batch.Set(s, state)
		return st.Apply(&batch)
	})
}

// BenchmarkSend: durable sends of one 1 KiB message by 64 concurrent
// senders, to a queue and to a topic with 10 subscriptions whose
// correlation filters match half of the messages.
func BenchmarkSend(b *testing.B) {
	b.Run("queue", func(b *testing.B) {
		br, _ := benchEnv(b)
		mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q"})
		runConcurrent(b, benchSenders, func(i int64) error {
			_, err := br.Send(context.Background(), "q", &core.Message{Body: payload})
			return err
		})
	})
	b.Run("topic-10-subs", func(b *testing.B) {
		br, _ := benchEnv(b)
		mustCreateB(b, br, core.Entity{Kind: core.KindTopic, Name: "t"})
		for s := range 10 {
			mustCreateB(b, br, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: fmt.Sprintf("s%d", s),
				Rules: []core.Rule{{Name: "r", Filter: core.Filter{Kind: core.FilterCorrelation,
					Correlation: &core.CorrelationFilter{Properties: map[string]any{"half": int64(s % 2)}}}}}})
		}
		runConcurrent(b, benchSenders, func(i int64) error {
			m := &core.Message{Body: payload, ApplicationProperties: map[string]any{"half": int64(0)}}
			_, err := br.Send(context.Background(), "t", m)
			return err
		})
	})
}

// fill queues n messages in batches, untimed.
func fill(b *testing.B, br *core.Broker, path string, n int, session func(i int) string) {
	b.Helper()
	const batch = 500
	for i := 0; i < n; i += batch {
		msgs := make([]*core.Message, min(batch, n-i))
		for j := range msgs {
			msgs[j] = &core.Message{Body: payload}
			if session != nil {
				msgs[j].SessionID = session(i + j)
			}
		}
		if _, err := br.Send(context.Background(), path, msgs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceiveComplete: peek-lock receive then complete, 64
// concurrent receivers on a backlog.
func BenchmarkReceiveComplete(b *testing.B) {
	br, _ := benchEnv(b)
	mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q"})
	fill(b, br, "q", b.N, nil)
	runConcurrent(b, benchSenders, func(i int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs, err := br.Receive(ctx, "q", core.ReceiveOptions{})
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return fmt.Errorf("receive got %d", len(msgs))
		}
		return br.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete})
	})
}

// BenchmarkSendToWaitingReceiver: each send finds a receiver blocked on
// the queue and hands the message over from memory; reads/op shows that
// neither the hand-over nor the complete reads storage.
func BenchmarkSendToWaitingReceiver(b *testing.B) {
	st := openBenchStore(b, b.TempDir())
	cs := &coretest.CountingStore{Store: st}
	br := newBenchBroker(b, cs)
	b.Cleanup(func() { br.Close(); st.Close() })
	mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q"})
	got := make(chan error, 1)
	receive := func() {
		msgs, err := br.Receive(context.Background(), "q", core.ReceiveOptions{})
		if err == nil && len(msgs) == 1 {
			err = br.Settle(context.Background(), "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete})
		}
		got <- err
	}
	b.ResetTimer()
	reads := cs.Reads()
	start := time.Now()
	for range b.N {
		go receive()
		core.WaitForWaiters(br, "q", 1)
		if _, err := br.Send(context.Background(), "q", &core.Message{Body: payload}); err != nil {
			b.Fatal(err)
		}
		if err := <-got; err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(cs.Reads()-reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
}

// BenchmarkRecovery: opening a broker on a store holding -recovery.n
// queued messages (default 100k; the time scales linearly, so 1M takes
// about ten times as long).
func BenchmarkRecovery(b *testing.B) {
	dir := b.TempDir()
	st := openBenchStore(b, dir)
	br := newBenchBroker(b, st)
	mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q"})
	fill(b, br, "q", *recoveryN, nil)
	br.Close()
	st.Close()
	b.ResetTimer()
	for range b.N {
		st := openBenchStore(b, dir)
		start := time.Now()
		br := newBenchBroker(b, st)
		el := time.Since(start)
		b.StopTimer()
		if c, _ := br.Counts("q"); c.Active != int64(*recoveryN) {
			b.Fatalf("recovered %d of %d", c.Active, *recoveryN)
		}
		br.Close()
		st.Close()
		b.ReportMetric(float64(*recoveryN)/el.Seconds(), "msg/s")
		b.ReportMetric(el.Seconds()/float64(*recoveryN)*1e6, "s/1M-msg") // linear extrapolation
		b.StartTimer()
	}
}

// BenchmarkAcceptNextSession: accept-next-available latency with 10k
// sessions ready, each op locking one more session until all are held.
func BenchmarkAcceptNextSession(b *testing.B) {
	const sessions = 10_000
	br, _ := benchEnv(b)
	mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true})
	fill(b, br, "q", sessions, func(i int) string { return fmt.Sprintf("s%05d", i) })
	held := make([]*core.SessionLock, 0, sessions)
	release := func() {
		for _, sl := range held {
			if err := br.CloseSession("q", sl); err != nil {
				b.Fatal(err)
			}
		}
		held = held[:0]
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		if len(held) == sessions {
			b.StopTimer()
			release()
			runtime.GC()
			b.StartTimer()
		}
		start := time.Now()
		sl, err := br.AcceptSession(context.Background(), "q", "")
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, sl)
	}
	b.StopTimer()
	release()
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/1e3, "µs/accept")
}

// BenchmarkReceiveBatchComplete is what an AMQP link with credit does: one
// receiver takes up to 100 backlog messages per call and completes them
// together.
func BenchmarkReceiveBatchComplete(b *testing.B) {
	br, _ := benchEnv(b)
	mustCreateB(b, br, core.Entity{Kind: core.KindQueue, Name: "q"})
	fill(b, br, "q", b.N, nil)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msgs, err := br.Receive(ctx, "q", core.ReceiveOptions{Max: 100})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		toks := make([]core.LockToken, len(msgs))
		for i, m := range msgs {
			toks[i] = m.LockToken
		}
		for _, err := range br.CompleteMany("q", toks, true) {
			if err != nil {
				b.Fatal(err)
			}
		}
		done += len(msgs)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}
