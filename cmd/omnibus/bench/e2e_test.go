package bench

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/core"
)

// newTestOmnibus starts an in-memory omnibus with a queue "bench", a
// session queue "bench-sessions" and a topic "bench-topic" with
// subscriptions s1 and s2, and returns its AMQP and HTTP base URLs.
func newTestOmnibus(t testing.TB) (amqpURL, httpURL string) {
	t.Helper()
	a := startTestOmnibus(t)
	return "amqp://" + a.AMQPAddr().String(), "http://" + a.HTTPAddr().String()
}

// startTestOmnibus is newTestOmnibus returning the broker itself.
func startTestOmnibus(t testing.TB) *app.App {
	t.Helper()
	a, err := app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	for _, e := range []core.Entity{
		{Kind: core.KindQueue, Name: "bench"},
		{Kind: core.KindQueue, Name: "bench-sessions", RequiresSession: true},
		{Kind: core.KindQueue, Name: "bench-partitioned", EnablePartitioning: true},
		{Kind: core.KindTopic, Name: "bench-topic"},
		{Kind: core.KindSubscription, Topic: "bench-topic", Name: "s1"},
		{Kind: core.KindSubscription, Topic: "bench-topic", Name: "s2"},
	} {
		if _, err := a.Broker.CreateEntity(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if a.AMQPAddr() == nil || a.HTTPAddr() == nil {
		t.Fatal("omnibus started without its AMQP or HTTP listener")
	}
	return a
}

func TestEndToEndAgainstOmnibus(t *testing.T) {
	url, httpURL := newTestOmnibus(t)
	for _, c := range []Config{
		{Scenario: ScenarioSend, Count: 2000, Inflight: 50},
		{Scenario: ScenarioSend, Count: 2000, Presettled: true},
		{Scenario: ScenarioSend, Count: 2000, Inflight: 50, DirectWrites: true},
		{Scenario: ScenarioBoth, Count: 1000, Inflight: 50, DirectWrites: true},
		{Scenario: ScenarioBoth, Count: 2000, Inflight: 50, Durable: true},
		{Scenario: ScenarioBoth, Count: 600, Inflight: 20, Rate: 2000},
		{Scenario: ScenarioBoth, Count: 1000, Inflight: 50, MaxBacklog: 20},
		{Scenario: ScenarioReceive, Count: 2000, Inflight: 50},
		{Scenario: ScenarioReceive, Count: 2000, Inflight: 50, BatchCredit: true, Credit: 30},
		{Scenario: ScenarioBoth, Count: 1000, RAD: true},
		{Scenario: ScenarioSessions, Count: 400, Sessions: 4, Queue: "bench-sessions"},
		{Scenario: ScenarioReceive, Count: 1000, Inflight: 50, SDK: true},
		{Scenario: ScenarioFanout, Count: 500, Inflight: 20, Topic: "bench-topic", Subscriptions: []string{"s1", "s2"}},
		{Scenario: ScenarioREST, Count: 300, Inflight: 8},
	} {
		name := c.Scenario
		if c.BatchCredit {
			name += "-batch-credit"
		}
		if c.Presettled {
			name += "-presettled"
		}
		if c.RAD {
			name += "-rad"
		}
		if c.SDK {
			name += "-sdk"
		}
		if c.Rate > 0 {
			name += "-rate"
		}
		if c.DirectWrites {
			name += "-direct"
		}
		if c.MaxBacklog > 0 {
			name += "-max-backlog"
		}
		t.Run(name, func(t *testing.T) {
			c.URL, c.User, c.Password = url, "RootManageSharedAccessKey", "SAS_KEY_VALUE"
			c.HTTPURL, c.KeyName, c.Key = httpURL, "RootManageSharedAccessKey", "SAS_KEY_VALUE"
			if c.Queue == "" {
				c.Queue = "bench"
			}
			c.Connections, c.Links, c.Quiet = 1, 1, true
			if c.Credit == 0 {
				c.Credit = 100
			}
			if c.Inflight == 0 {
				c.Inflight = 10
			}
			// Both bounds are for hangs, not speed: a subtest takes 0.3-4 s
			// with -race at load 8, and CI machines have run at 15-36.
			c.DrainTimeout = time.Minute
			c.BrokerPID = os.Getpid() // the broker runs in this process
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			// Every error fails the test, a network error included: the
			// broker runs in this process, so a refused or broken
			// connection is a broker fault, never the environment's.
			r, err := Run(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("run failed: %v", err)
			}
			if r.DirectWrites != c.DirectWrites {
				t.Errorf("result says direct writes %v, the run asked for %v", r.DirectWrites, c.DirectWrites)
			}
			if c.sends() && r.Tally.Acked != c.Count {
				t.Errorf("acked %d, want %d", r.Tally.Acked, c.Count)
			}
			want := r.Tally.Acked + r.Tally.Deliveries
			if c.Scenario == ScenarioReceive {
				want -= c.Count // the pre-fill, sent before the CPU is counted
			}
			if r.Operations != want || r.ClientCPU <= 0 || r.BrokerCPU <= 0 {
				t.Errorf("cpu: %d operations (want %d), client %.3f s, broker %.3f s", r.Operations, want, r.ClientCPU, r.BrokerCPU)
			}
			// A fixed rate records how late each send started; no rate, no lag.
			if lag := r.SendLag; (c.Rate > 0) != (lag.Count > 0) || (c.Rate > 0 && (lag.Count != uint64(r.Tally.Acked) || lag.P50ms < 0)) {
				t.Errorf("send lag %+v for rate %v and %d sends", lag, c.Rate, r.Tally.Acked)
			}
			if r.MachineBusyPct <= 0 || r.MachineBusyPct > 100 || r.MachineStealPct < 0 || r.MachineBusyPct+r.MachineStealPct > 100.01 {
				t.Errorf("machine %.1f %% busy, %.1f %% stolen", r.MachineBusyPct, r.MachineStealPct)
			}
			// Every acknowledged message reaches every stream (a fanout's
			// subscriptions) once.
			if want := r.Tally.Acked * int64(c.streams()); c.receives() && r.Tally.Unique != want {
				t.Errorf("delivered %d (message, stream) pairs, want %d", r.Tally.Unique, want)
			}
		})
	}
}

// TestPartitionKeysOverSeveralURLs sends with partition keys to a
// partitioned queue over connections to two endpoints (the same broker
// twice, as make cluster-scale's SCENARIO=partitioned names every node):
// every message arrives once, and the result counts the deliveries by the
// partition their broker sequence numbers name, more than one of them.
func TestPartitionKeysOverSeveralURLs(t *testing.T) {
	url, _ := newTestOmnibus(t)
	c := Config{Scenario: ScenarioBoth, URL: url + "," + url, User: "RootManageSharedAccessKey", Password: "SAS_KEY_VALUE",
		Queue: "bench-partitioned", Connections: 2, Links: 1, Inflight: 20, Credit: 50, Count: 800, PartitionKeys: 32,
		DrainTimeout: time.Minute, Quiet: true}
	r, err := Run(t.Context(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil || r.Tally.Acked != 800 || r.Tally.Unique != 800 {
		t.Fatalf("acked %d, delivered %d unique, err %v; want 800 each, no error", r.Tally.Acked, r.Tally.Unique, err)
	}
	var counted int64
	for _, n := range r.Tally.Partitions {
		counted += n
	}
	if len(r.Tally.Partitions) < 2 || counted != r.Tally.Deliveries {
		t.Errorf("partitions %v (%d deliveries counted of %d): want several, every delivery counted", r.Tally.Partitions, counted, r.Tally.Deliveries)
	}
	for _, bad := range []Config{
		{Scenario: ScenarioBoth, URL: url, PartitionKeys: -1},
		{Scenario: ScenarioBoth, URL: url, PartitionKeys: 4, SDK: true},
		{Scenario: ScenarioREST, URL: url + "," + url},
		{Scenario: ScenarioBoth, URL: " , "},
	} {
		bad.Count, bad.Connections, bad.Links, bad.Inflight, bad.Credit = 1, 1, 1, 1, 1
		if err := bad.validate(); !IsUsage(err) {
			t.Errorf("%+v: validate says %v, want a usage error", bad, err)
		}
	}
}

// drain empties a queue of another run's messages and counts them.
func TestDrainCountsForeignMessages(t *testing.T) {
	url, _ := newTestOmnibus(t)
	base := Config{URL: url, User: "RootManageSharedAccessKey", Password: "SAS_KEY_VALUE", Queue: "bench",
		Connections: 1, Links: 1, Inflight: 20, Credit: 50, Quiet: true}
	send := base
	send.Scenario, send.Count = ScenarioSend, 300
	r, err := Run(t.Context(), send, nil)
	if err != nil || r.Err() != nil {
		t.Fatalf("send: %v %v", err, r.Err())
	}
	drain := base
	drain.Scenario, drain.RAD, drain.DrainTimeout = ScenarioDrain, true, 300*time.Millisecond
	r, err = Run(t.Context(), drain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Received != 300 || r.Tally.Foreign != 300 || r.Err() != nil {
		t.Errorf("drain received %d (foreign %d, err %v), want the 300 sent before", r.Received, r.Tally.Foreign, r.Err())
	}
}

// TestRunFailsWhenTheBrokerIsGone shows that what the end-to-end test
// checks fails when the network does: a broker that refuses connections
// makes Run return an error, and one that goes away in the middle of a run
// makes the result's Err non-nil. Neither may pass, nor be skipped.
func TestRunFailsWhenTheBrokerIsGone(t *testing.T) {
	a := startTestOmnibus(t)
	base := Config{User: "RootManageSharedAccessKey", Password: "SAS_KEY_VALUE", Queue: "bench",
		Connections: 1, Links: 1, Inflight: 20, Credit: 50, Quiet: true, DrainTimeout: 2 * time.Second}

	refused := base
	refused.URL, refused.Scenario, refused.Count = "amqp://"+closedPort(t), ScenarioSend, 10
	if _, err := Run(t.Context(), refused, nil); err == nil {
		t.Errorf("a run against a closed port returned no error")
	}

	dies := base
	dies.URL, dies.Scenario, dies.Duration = "amqp://"+a.AMQPAddr().String(), ScenarioBoth, 3*time.Second
	// The cleanup shuts the broker down again: gone orders that after this
	// Shutdown (App.Shutdown is not safe to run twice at once).
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		time.Sleep(300 * time.Millisecond) // let the run get going; any moment would do
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := Run(ctx, dies, nil)
	<-gone
	if err == nil && r.Err() == nil {
		t.Errorf("a run whose broker went away passed: %d acked, %d delivered", r.Tally.Acked, r.Tally.Deliveries)
	}
	// Its senders paused after each failure (errorPause) instead of
	// failing sends as fast as the link refused them, which took the
	// machine's CPU from what they measured.
	if r.Tally.SendFailed > 200 {
		t.Errorf("%d sends failed in the 2.7 s after the broker went away: the senders spun instead of pausing", r.Tally.SendFailed)
	}
	t.Logf("%d acked, %d failed", r.Tally.Acked, r.Tally.SendFailed)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestRunOverTLSAndWebSockets runs the load generator over AMQPS, and
// over AMQP over WebSockets on the HTTP and HTTPS listeners, trusting
// the broker's local CA: every message sent is received once.
func TestRunOverTLSAndWebSockets(t *testing.T) {
	a, err := app.Start(app.Options{Memory: true, AMQPAddr: "-", AMQPSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", TLSDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	if _, err := a.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "bench"}); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{
		"amqps://" + a.AMQPSAddr().String(),
		"ws://" + a.HTTPAddr().String() + "/$servicebus/websocket",
		"wss://" + a.HTTPSAddr().String() + "/$servicebus/websocket",
	} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			c := Config{Scenario: ScenarioBoth, URL: url, CAFile: a.CAPath, User: "RootManageSharedAccessKey", Password: "SAS_KEY_VALUE",
				Queue: "bench", Count: 1000, Inflight: 50, Credit: 100, Connections: 1, Links: 1, Quiet: true, DrainTimeout: 10 * time.Second}
			ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
			defer cancel()
			r, err := Run(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("run failed: %v", err)
			}
			if r.Tally.Acked != c.Count || r.Tally.Unique != c.Count {
				t.Errorf("acked %d, delivered %d, want %d each", r.Tally.Acked, r.Tally.Unique, c.Count)
			}
		})
	}
}
