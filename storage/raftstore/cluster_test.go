package raftstore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// testCluster is a group of nodes in this process, over the real peer
// transport (mutual TLS with a CA of the cluster's own) on loopback or
// over a memNet.
type testCluster struct {
	t     testing.TB
	net   *memNet // nil: the network transport
	ca    *peertls.CA
	creds map[uint64]*peertls.Creds
	peers map[uint64]string
	lns   map[uint64]net.Listener
	dirs  map[uint64]string
	nodes map[uint64]*Node
	tune  func(*Config)
	// mu guards writes of nodes, for goroutines of a test that read it
	// (the test's own goroutine reads it without).
	mu sync.Mutex
}

// testAdminKey is what the test clusters' Admin hook wants in the
// Authorization header (the broker checks a SAS token there).
const testAdminKey = "test-manage-key"

func testAdmin(r *http.Request) error {
	if r.Header.Get("Authorization") != testAdminKey {
		return errors.New("wrong or missing test key")
	}
	return nil
}

// newTestCreds makes node id's credentials, issued by ca.
func newTestCreds(t testing.TB, ca *peertls.CA, id uint64) *peertls.Creds {
	t.Helper()
	c, err := ca.NewNode(id, []*x509.Certificate{ca.Cert}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// client is a peer Client with node 1's certificate and the admin key.
func (c *testCluster) client() *Client {
	cl := NewClient(c.creds[1], func() string { return testAdminKey })
	c.t.Cleanup(cl.CloseIdleConnections)
	return cl
}

// testTiming: fast enough for many elections, slow enough that a loaded
// machine (two cores, the race detector, 12 MiB batches) does not lose
// leases by accident.
func testTiming(c *Config) {
	c.TickInterval = 50 * time.Millisecond
	c.ElectionTicks = 30 // election after 1.5–3 s; lease 1.35 s
}

// patientTiming is for tests that need one leader to keep its lease
// throughout (they write through one Session): a machine loaded far
// beyond its cores (race detector, other test binaries, loop turns of
// half a second seen at a load average of 25 on two cores) must not
// depose it. Elections take 4–8 s; the lease is 3.7 s.
func patientTiming(c *Config) {
	c.TickInterval = 100 * time.Millisecond
	c.ElectionTicks = 40
}

// newTestCluster starts size nodes (ids 1..size).
func newTestCluster(t testing.TB, size int, mem bool, tune func(*Config)) *testCluster {
	ca, err := peertls.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, ca: ca, creds: map[uint64]*peertls.Creds{}, peers: map[uint64]string{}, lns: map[uint64]net.Listener{},
		dirs: map[uint64]string{}, nodes: map[uint64]*Node{}, tune: tune}
	if mem {
		c.net = newMemNet()
		t.Cleanup(c.net.stop)
	}
	base := t.TempDir()
	for id := uint64(1); id <= uint64(size); id++ {
		c.dirs[id] = filepath.Join(base, fmt.Sprintf("node%d", id))
		c.creds[id] = newTestCreds(t, ca, id)
		if mem {
			c.peers[id] = fmt.Sprintf("mem-%d", id)
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.lns[id], c.peers[id] = ln, ln.Addr().String()
	}
	for id := range c.peers {
		c.start(id)
	}
	t.Cleanup(c.closeAll)
	return c
}

// start opens node id (again, after stop).
func (c *testCluster) start(id uint64) *Node {
	c.t.Helper()
	if c.net == nil && c.creds[id] == nil { // a cluster built by hand: its CA and certificates now
		if c.ca == nil {
			ca, err := peertls.NewCA(time.Now())
			if err != nil {
				c.t.Fatal(err)
			}
			c.ca, c.creds = ca, map[uint64]*peertls.Creds{}
		}
		c.creds[id] = newTestCreds(c.t, c.ca, id)
	}
	cfg := Config{ID: id, Peers: c.peers, Dir: c.dirs[id], TLS: c.creds[id], Admin: testAdmin,
		Logger:       zaptest.NewLogger(c.t).Named(fmt.Sprint("n", id)),
		Store:        pebblestore.Options{LazySyncDelay: 50 * time.Millisecond},
		segmentBytes: 1 << 20} // the log rotates often: every test goes through it
	testTiming(&cfg)
	if c.tune != nil {
		c.tune(&cfg)
	}
	if c.net != nil {
		cfg.transport = c.net.transport(id)
	} else if ln := c.lns[id]; ln != nil {
		cfg.Listener, c.lns[id] = ln, nil
	} else {
		cfg.ListenAddr = c.peers[id]
	}
	n, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open node %d: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n
}

// stop closes node id (a clean stop; its directory stays).
func (c *testCluster) stop(id uint64) {
	if n := c.nodes[id]; n != nil {
		if err := n.Close(); err != nil {
			c.t.Errorf("close node %d: %v", id, err)
		}
		c.mu.Lock()
		delete(c.nodes, id)
		c.mu.Unlock()
	}
}

func (c *testCluster) closeAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

// session waits (up to a minute) for any node but those excluded to
// hand out a Session, and returns it with its node's id.
func (c *testCluster) session(exclude ...uint64) (*Session, uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type got struct {
		s  *Session
		id uint64
	}
	ch := make(chan got, len(c.nodes))
	n := 0
	for id, node := range c.nodes {
		skip := false
		for _, x := range exclude {
			skip = skip || x == id
		}
		if skip {
			continue
		}
		n++
		go func() {
			s, err := node.Session(ctx)
			if err != nil {
				ch <- got{}
				return
			}
			ch <- got{s, id}
		}()
	}
	var first got
	for range n {
		g := <-ch
		if g.s == nil {
			continue
		}
		if first.s == nil {
			first = g
			cancel() // the others give up
			continue
		}
		g.s.Close() // a second leader in a later term: keep the first
	}
	if first.s == nil {
		c.t.Fatalf("no node served within a minute")
	}
	return first.s, first.id
}

// mustPut writes key=value through s.
func mustPut(t testing.TB, s storage.Store, key, value string) {
	t.Helper()
	b := &storage.Batch{Sync: true}
	b.Set([]byte(key), []byte(value))
	if err := s.Apply(b); err != nil {
		t.Fatalf("Apply %s: %v", key, err)
	}
}

// stateGet reads a core key straight from node n's state database.
func stateGet(n *Node, key string) (string, error) {
	v, err := n.state.get([]byte(key))
	return string(v), err
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isNotFound(err error) bool { return errors.Is(err, storage.ErrNotFound) }
