package soak

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/binarytest"
)

// TestSoakShort is the short crash soak CI runs: SIGKILLs of the real
// binary under load, each followed by a restart on the same data
// directory, then the full accounting, which must be clean: two kills and
// a failing disk on a queue (every send in flight answered, SIGTERM's exit
// within 5 s with status 1), two kills on a topic whose two subscriptions
// share each body.
func TestSoakShort(t *testing.T) {
	bin := binarytest.Build(t)
	for _, c := range []Config{
		{Kills: 2, DiskFaults: 1},
		{Kills: 2, Subscriptions: 2},
	} {
		name := "queue"
		if c.Subscriptions > 0 {
			name = "topic"
		}
		t.Run(name, func(t *testing.T) {
			c.Binary, c.Dir, c.MinUptime, c.MaxUptime = bin, t.TempDir(), 300*time.Millisecond, time.Second
			c.Senders, c.Inflight, c.Receivers, c.Credit, c.Settlers = 2, 16, 2, 100, 16
			soakShort(t, c)
		})
	}
}

func soakShort(t *testing.T, c Config) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	r, err := Run(ctx, c, binarytest.LogWriter{T: t})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(r.Restarts) != c.Kills+c.DiskFaults {
		t.Fatalf("%d restarts, want %d", len(r.Restarts), c.Kills+c.DiskFaults)
	}
	if n := len(r.diskFaults()); n != c.DiskFaults {
		t.Fatalf("%d disk faults, want %d", n, c.DiskFaults)
	}
	for i, df := range r.diskFaults() {
		if df.InFlight == 0 || df.Unknown+df.Refused == 0 {
			t.Errorf("disk fault %d: %+v: no send was in flight, or none was answered as the disk failed: it proves nothing", i+1, *df)
		}
	}
	// Under load: every life of the broker acknowledged sends, and the
	// receivers completed what was sent, on every stream.
	for i, rs := range r.Restarts {
		if rs.Acked == 0 || rs.Recovery <= 0 {
			t.Errorf("restart %d: %+v: no sends acknowledged before the kill, or no recovery measured", i+1, rs)
		}
	}
	streams := int64(max(c.Subscriptions, 1))
	if r.LastLifeAcked == 0 || r.Tally.Completed == 0 || r.Tally.Unique < streams*r.Tally.Acked {
		t.Errorf("last life acknowledged %d; %d completed, %d (message, stream) pairs received of %d × %d acknowledged",
			r.LastLifeAcked, r.Tally.Completed, r.Tally.Unique, streams, r.Tally.Acked)
	}
}

// TestSoakCatchesLoss shows the soak can fail: a broker that keeps
// messages only in memory forgets everything at a kill, and the
// accounting must report the loss: messages acknowledged but never
// received (those still queued) or received but gone without a
// completion (those delivered and not yet completed), depending on how
// far the receivers had got. The receiver (one message of credit, one
// completion at a time) cannot keep up with the senders (32 sends in
// flight), so at the kill there is a backlog to lose however the load on
// the machine stalls either side: with a receiver nearly as fast as its
// sender, a kill could find it caught up (8 lost in one of 10 runs under
// load), and a broker that loses everything would then lose nothing the
// ledger knew of.
func TestSoakCatchesLoss(t *testing.T) {
	c := Config{Binary: binarytest.Build(t), BrokerArgs: []string{"--memory"}, Dir: t.TempDir(), Kills: 1,
		MinUptime: time.Second, MaxUptime: time.Second, Senders: 2, Inflight: 16, Receivers: 1,
		Credit: 1, Settlers: 1, DrainTimeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	r, err := Run(ctx, c, binarytest.LogWriter{T: t})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Err()
	if lost := r.Tally.Lost + r.Vanished(); lost == 0 || err == nil {
		t.Fatalf("a broker that forgets everything at a kill: %d lost, %d vanished, err %v", r.Tally.Lost, r.Vanished(), err)
	}
	t.Logf("reported: %v", err)
}

func TestVanishedNeedsACompletionUnderWay(t *testing.T) {
	r := &Result{Drained: true, CompletionsAtKills: 5}
	r.Tally.OnlyUnanswered = 5
	if r.Vanished() != 0 || r.Err() != nil {
		t.Errorf("5 silent completions with 5 under way at the kills: vanished %d, err %v", r.Vanished(), r.Err())
	}
	r.Tally.OnlyUnanswered, r.Tally.NeverCompleted = 7, 1
	if r.Vanished() != 3 || r.Err() == nil || !strings.Contains(r.Err().Error(), "3 received, then gone") {
		t.Errorf("7 silent completions with 5 under way and 1 never completed: vanished %d, err %v", r.Vanished(), r.Err())
	}
}
