package clustersoak

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/binarytest"
)

// TestClusterSoakShort is the short failover soak CI runs: three omnibus
// processes, the official SDK sending and receiving through a load
// balancer, the leader killed, then cut off the network (where network
// namespaces can be made: the log says why not), then frozen (SIGSTOP),
// each time with the old leader brought back; then the full accounting,
// which must be clean. make cluster-test runs the long one.
func TestClusterSoakShort(t *testing.T) {
	soakShort(t, 0, 0)
}

// TestClusterSoakGroupsShort is the same with three data groups (omnibus
// --groups 3): each node leads one, the failovers depose each node in
// turn (the meta leader killed, another node cut off or frozen, the meta
// leader frozen: faults.go), and the clients' links are served across
// nodes (clusterrpc). Half the load is on a partitioned queue spread over
// the groups, sent with partition keys and checked for per-key order
// (pkeys.go), and 8 sessions on a partitioned queue that requires them
// are checked for order within each session (sessions.go). It caught a
// session message's completion reported done to the Go SDK and the
// message delivered again, as its group changed leaders (amqpserver/README.md,
// Go, "Session lock lost"), completions confirmed to the client
// and delivered again, and receivers that stalled for good (DESIGN.md,
// "Several Raft groups": what the AMQP clients are told); deliveries.log
// in the run's directory holds every delivery and completion.
func TestClusterSoakGroupsShort(t *testing.T) {
	soakShort(t, 3, 8)
}

func soakShort(t *testing.T, groups, sessions int) {
	c := Config{Binary: binarytest.Build(t), Dir: t.TempDir(), Failovers: 3, Mode: "mixed", Netns: "auto",
		MinUptime: 500 * time.Millisecond, MaxUptime: time.Second,
		Senders: 2, Inflight: 8, Receivers: 2, Prefetch: 20, Size: 256,
		ReadyTimeout: time.Minute, DrainTimeout: time.Minute, Groups: groups, Sessions: sessions}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	r, err := Run(ctx, c, binarytest.LogWriter{T: t})
	if r != nil {
		var table bytes.Buffer
		if werr := r.WriteTable(&table); werr != nil {
			t.Error(werr)
		}
		t.Logf("\n%s", table.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if !r.Netns {
		t.Logf("nodes ran on loopback, a cut-off was a SIGSTOP: %s", r.NetnsWhyNot)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(r.Failovers) != c.Failovers {
		t.Fatalf("%d failovers, want %d", len(r.Failovers), c.Failovers)
	}
	kinds := faultKinds(c.Mode, r.Netns)
	for i, f := range r.Failovers {
		if kind, meta := schedule(kinds, i+1); f.Kind != kind || groups > 0 && f.Meta != meta {
			t.Errorf("failover %d: %+v: want %s of the meta leader %v", i+1, f, kind, meta)
		}
		if groups > 0 {
			// The victim may lead no group the queue is in, nor the
			// meta group (whose terms these are): no new term needed.
			if f.New == f.Old || f.FirstAck < f.Elected {
				t.Errorf("failover %d: %+v: the victim serves its groups still, or no send acknowledged after it", i+1, f)
			}
			continue
		}
		if f.New == f.Old || f.NewTerm <= f.OldTerm || f.FirstAck <= 0 {
			t.Errorf("failover %d: %+v: the same leader, no new term, or no send acknowledged after it", i+1, f)
		}
		if f.Elected <= 0 || f.FirstAck < f.Elected {
			t.Errorf("failover %d: %+v: the new leader served before the fault took effect, or the first ack counted came before it served", i+1, f)
		}
	}
	if r.Tally.Acked == 0 || r.Tally.Completed == 0 || r.Tally.Unique < r.Tally.Acked {
		t.Fatalf("tally %+v: nothing acknowledged, nothing completed, or acknowledged messages missing", r.Tally)
	}
	if groups > 0 && (r.Order.Checked == 0 || r.Order.Keys < 2) {
		t.Fatalf("order %+v: the partitioned queue's messages were not checked", r.Order)
	}
}
