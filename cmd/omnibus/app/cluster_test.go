package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/cmd/internal/loopback"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// freeAddr returns a loopback address nothing listened on a moment ago,
// for a cluster node's port, which the node binds itself later (below the
// ephemeral range: loopback.FreeAddr says why).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startTestCluster starts three cluster nodes in this process, with AMQP
// and HTTP listeners only.
func startTestCluster(t *testing.T) map[uint64]*Cluster {
	t.Helper()
	return startTestClusterWith(t, nil)
}

// startTestClusterWith starts three cluster nodes in this process, the
// way an operator does: `omnibus cluster init` for node 1, which is
// started first, then join tokens from it for nodes 2 and 3. Edit, if
// set, changes each node's options (listeners are on loopback ports,
// AMQPS and HTTPS off, unless edit turns them on).
func startTestClusterWith(t *testing.T, edit func(*Options)) map[uint64]*Cluster {
	t.Helper()
	return startTestClusterOf(t, 3, edit, nil)
}

// startTestClusterOf is startTestClusterWith for size nodes, editCluster
// changing each node's cluster options.
func startTestClusterOf(t *testing.T, size int, edit func(*Options), editCluster func(*ClusterOptions)) map[uint64]*Cluster {
	t.Helper()
	// Every node's peer port is picked before the first node starts, so
	// another test may bind one of them meanwhile (freeAddr: rare, seen
	// in CI). The cluster then starts again on other ports.
	for attempt := 1; ; attempt++ {
		nodes, err := tryStartTestCluster(t, size, edit, editCluster)
		if err == nil {
			return nodes
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("starting the cluster again on other ports: %v", err)
	}
}

// tryStartTestCluster starts the nodes of startTestClusterOf, shutting
// down those it started if one fails to start (and again at the test's
// end, as every node it starts: a second Shutdown does nothing more).
func tryStartTestCluster(t *testing.T, size int, edit func(*Options), editCluster func(*ClusterOptions)) (map[uint64]*Cluster, error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	peers := map[uint64]string{}
	for id := uint64(1); id <= uint64(size); id++ {
		peers[id] = freeAddr(t)
	}
	nodes := map[uint64]*Cluster{}
	t.Cleanup(func() {
		for _, c := range nodes {
			c.Shutdown(context.Background())
		}
	})
	var admin *raftstore.Client
	for id := uint64(1); id <= uint64(size); id++ {
		o := Options{DataDir: filepath.Join(t.TempDir(), fmt.Sprint(id)), ConfigPath: cfg,
			AMQPAddr: "127.0.0.1:0", AMQPSAddr: "-", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", Logger: zaptest.NewLogger(t).Named(fmt.Sprint("n", id))}
		if edit != nil {
			edit(&o)
		}
		co := ClusterOptions{NodeID: id, Peers: peers, TickInterval: 50 * time.Millisecond, ElectionTicks: 30}
		if editCluster != nil {
			editCluster(&co)
		}
		if id == 1 {
			creds, err := peertls.Init(PeerTLSDir(filepath.Join(o.DataDir, "cluster")), 1, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			admin = raftstore.NewClient(creds, AdminToken(DefaultKeyName, DefaultKey))
			t.Cleanup(admin.CloseIdleConnections)
		} else {
			tok, err := admin.JoinToken(t.Context(), peers[1], id, 0)
			if err != nil {
				t.Fatalf("a join token for node %d: %v", id, err)
			}
			co.JoinToken = tok
		}
		c, err := StartCluster(o, co)
		if err != nil {
			for _, c := range nodes {
				c.Shutdown(context.Background())
			}
			return nil, fmt.Errorf("StartCluster %d: %w", id, err)
		}
		nodes[id] = c
	}
	return nodes, nil
}

// waitLeader waits for one of nodes to serve and returns its id.
func waitLeader(t *testing.T, nodes map[uint64]*Cluster) uint64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for id, c := range nodes {
			if c.Serving() {
				return id
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no node served within a minute")
	return 0
}

// TestClusterServesThroughAnyNode: the official SDK sends through one
// follower and receives through the other (both proxy to the leader);
// after the leader stops, a new one serves what was sent, through the
// same addresses.
func TestClusterServesThroughAnyNode(t *testing.T) {
	nodes := startTestCluster(t)
	leader := waitLeader(t, nodes)
	var followers []*Cluster
	for id, c := range nodes {
		if id != leader {
			followers = append(followers, c)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	send := func(c *Cluster, bodies ...string) {
		t.Helper()
		cl, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close(ctx)
		s, err := cl.NewSender("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
				t.Fatalf("send %s: %v", b, err)
			}
		}
	}
	receive := func(c *Cluster, n int) []string {
		t.Helper()
		cl, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close(ctx)
		r, err := cl.NewReceiverForQueue("orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < n {
			msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			for _, m := range msgs {
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					t.Fatalf("complete: %v", err)
				}
				got = append(got, string(m.Body))
			}
		}
		return got
	}
	send(followers[0], "one", "two")
	if got := receive(followers[1], 1); got[0] != "one" {
		t.Fatalf("received %q first, want one", got)
	}

	if err := nodes[leader].Shutdown(ctx); err != nil {
		t.Fatalf("stopping the leader: %v", err)
	}
	delete(nodes, leader)
	next := waitLeader(t, nodes)
	t.Logf("leader %d stopped; %d leads", leader, next)
	for _, c := range nodes {
		send(c, "three")
	}
	got := receive(followers[0], 3)
	want := map[string]bool{"two": true, "three": true}
	for _, b := range got {
		if !want[b] {
			t.Fatalf("received %q after failover, want two and three (twice): %q", b, got)
		}
	}
}
