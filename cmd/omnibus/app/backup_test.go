package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.uber.org/zap/zaptest"
)

// Backups under load, accounted as the soaks account: every message whose
// send was acknowledged before the backup began is in what the backup
// restores (acknowledged-before-backup ⊆ restored), and the restored
// broker serves each of them once; nothing restored was never sent.

// sendLoad sends numbered messages to "orders" from a few SDK clients
// until stopped, recording which were acknowledged.
type sendLoad struct {
	mu     sync.Mutex
	acked  map[string]bool
	sent   map[string]bool // handed to the SDK, acknowledged or not
	errors int
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

func startSendLoad(t *testing.T, connStr string, senders int) *sendLoad {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	l := &sendLoad{acked: map[string]bool{}, sent: map[string]bool{}, stop: stop}
	for i := range senders {
		l.wg.Go(func() {
			c, err := azservicebus.NewClientFromConnectionString(connStr, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			s, err := c.NewSender("orders", nil)
			if err != nil {
				t.Error(err)
				return
			}
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("s%d-%d", i, n)
				l.mu.Lock()
				l.sent[id] = true
				l.mu.Unlock()
				sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err := s.SendMessage(sctx, &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil)
				cancel()
				l.mu.Lock()
				if err == nil {
					l.acked[id] = true
				} else if ctx.Err() == nil {
					l.errors++
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

// ackedNow is the set of messages acknowledged so far.
func (l *sendLoad) ackedNow() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool, len(l.acked))
	for id := range l.acked {
		out[id] = true
	}
	return out
}

func (l *sendLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(l.ackedNow()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d sends acknowledged in a minute", len(l.ackedNow()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *sendLoad) finish() {
	l.stop()
	l.wg.Wait()
}

// receiveAll takes every message of "orders" (receive-and-delete) until
// the queue stays empty, counting each id's deliveries.
func receiveAll(t *testing.T, connStr string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	r, err := c.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for empty := 0; empty < 2; {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		msgs, err := r.ReceiveMessages(rctx, 1000, nil)
		rcancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("receive: %v", err)
		}
		if len(msgs) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range msgs {
			got[m.MessageID]++
		}
	}
	return got
}

// account checks acknowledged-before-backup ⊆ restored, each once, and
// restored ⊆ sent.
func account(t *testing.T, before map[string]bool, l *sendLoad, restored map[string]int) {
	t.Helper()
	missing, dup, foreign := 0, 0, 0
	for id := range before {
		if restored[id] == 0 {
			missing++
		}
	}
	l.mu.Lock()
	for id, n := range restored {
		if n > 1 {
			dup++
		}
		if !l.sent[id] {
			foreign++
		}
	}
	acked := len(l.acked)
	l.mu.Unlock()
	t.Logf("acknowledged before the backup %d, in all %d; restored %d: missing %d, duplicated %d, never sent %d",
		len(before), acked, len(restored), missing, dup, foreign)
	if missing != 0 || dup != 0 || foreign != 0 {
		t.Fatalf("the backup lost %d acknowledged messages, restored %d twice and %d never sent", missing, dup, foreign)
	}
	if len(restored) <= len(before) {
		t.Logf("note: nothing sent during the backup was in it (%d restored)", len(restored))
	}
}

// backupUnderLoad runs the load against connStr, takes a backup through
// socket in the middle of it, and returns what was acknowledged before.
func backupUnderLoad(t *testing.T, connStr, socket, to string) (map[string]bool, *sendLoad, Manifest) {
	t.Helper()
	l := startSendLoad(t, connStr, 4)
	t.Cleanup(l.finish)
	l.waitAcked(t, 200)
	before := l.ackedNow() // the backup begins after these acknowledgements
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m, err := TakeBackup(ctx, socket, to)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	l.waitAcked(t, len(l.ackedNow())+100) // the load went on through it
	l.finish()
	return before, l, m
}

// startRestoredCluster starts a one-node cluster on a restored data
// directory.
func startRestoredCluster(t *testing.T, dir string) *Cluster {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{DataDir: dir, ConfigPath: cfg, AMQPAddr: "127.0.0.1:0", AMQPSAddr: "-", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-",
		Logger: zaptest.NewLogger(t).Named("restored")}
	c, err := StartCluster(o, ClusterOptions{NodeID: 1, Peers: map[uint64]string{1: freeAddr(t)},
		TickInterval: 50 * time.Millisecond, ElectionTicks: 30})
	if err != nil {
		t.Fatalf("starting the restored cluster: %v", err)
	}
	t.Cleanup(func() { c.Shutdown(context.Background()) })
	waitLeader(t, map[uint64]*Cluster{1: c})
	return c
}

func TestBackupOfASingleNodeUnderLoad(t *testing.T) {
	a := startTest(t, t.TempDir())
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	to := filepath.Join(t.TempDir(), "backup")
	before, l, m := backupUnderLoad(t, a.ConnectionString(), AdminSocketPath(a.opts.DataDir), to)
	if m.Kind != KindSingle || len(m.Files) == 0 {
		t.Fatalf("manifest %+v", m)
	}
	if fi, err := os.Stat(AdminSocketPath(a.opts.DataDir)); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the admin socket: %v, %v; want a socket only its owner opens (0600)", fi, err)
	}

	// As a single node.
	restored := filepath.Join(t.TempDir(), "single")
	if _, err := Restore(RestoreOptions{From: to, DataDir: restored}); err != nil {
		t.Fatal(err)
	}
	r := startTest(t, restored)
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	account(t, before, l, receiveAll(t, r.ConnectionString()))

	// As a new cluster's first node.
	node := filepath.Join(t.TempDir(), "node1")
	if _, err := Restore(RestoreOptions{From: to, DataDir: node, NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	account(t, before, l, receiveAll(t, startRestoredCluster(t, node).ConnectionString()))
}

func TestBackupOfAClusterUnderLoad(t *testing.T) {
	nodes := startTestCluster(t)
	leader := waitLeader(t, nodes)
	follower := uint64(1)
	if follower == leader {
		follower = 2
	}
	to := filepath.Join(t.TempDir(), "backup")
	// Through a follower: it waits until it has applied what the leader
	// had committed when the backup began.
	before, l, m := backupUnderLoad(t, nodes[follower].ConnectionString(), AdminSocketPath(nodes[follower].opts.DataDir), to)
	if m.Kind != KindCluster || m.Node != follower || m.Index == 0 {
		t.Fatalf("manifest %+v: want a cluster backup by node %d", m, follower)
	}

	// A new cluster: its first node alone, which refuses to start with
	// founding peers (they would apply the log to empty databases).
	node := filepath.Join(t.TempDir(), "node1")
	if _, err := Restore(RestoreOptions{From: to, DataDir: node, NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	o := Options{DataDir: node, AMQPAddr: "127.0.0.1:0", AMQPSAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", Logger: zaptest.NewLogger(t)}
	_, err := StartCluster(o, ClusterOptions{NodeID: 1, Peers: map[uint64]string{1: freeAddr(t), 2: freeAddr(t)}})
	if err == nil || !strings.Contains(err.Error(), "restored data") {
		t.Fatalf("a restored node started with two founding members: %v, want refused", err)
	}
	account(t, before, l, receiveAll(t, startRestoredCluster(t, node).ConnectionString()))

	// And as a single node.
	single := filepath.Join(t.TempDir(), "single")
	if _, err := Restore(RestoreOptions{From: to, DataDir: single}); err != nil {
		t.Fatal(err)
	}
	r := startTest(t, single)
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	account(t, before, l, receiveAll(t, r.ConnectionString()))
}
