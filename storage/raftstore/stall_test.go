package raftstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// throttleProxy forwards TCP connections to a node's peer port. While
// throttled it takes what the dialling side writes one byte a second: to
// the nodes that dial it, its node is a peer that reads one byte a second.
// What the node writes back goes at full speed.
type throttleProxy struct {
	ln   net.Listener
	to   string
	slow atomic.Bool
	done chan struct{}

	mu    sync.Mutex // guards conns
	conns []net.Conn
	wg    sync.WaitGroup
}

// newThrottleProxy starts a proxy to the address to; the test's cleanup
// stops it.
func newThrottleProxy(t testing.TB, to string) *throttleProxy {
	t.Helper()
	// A small receive buffer closes the TCP window soon: the writers
	// block, as they would on a peer that stopped reading.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &throttleProxy{ln: ln, to: to, done: make(chan struct{})}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.close)
	return p
}

func (p *throttleProxy) addr() string { return p.ln.Addr().String() }

func (p *throttleProxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		p.wg.Go(func() {
			_, _ = io.Copy(c, d)
			c.Close()
		})
		p.wg.Go(func() {
			p.pumpLoop(d, c)
			d.Close()
		})
	}
}

// pumpLoop copies from the dialling side src to the node dst: at full
// speed, or one byte a second while throttled.
func (p *throttleProxy) pumpLoop(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n := len(buf)
		if p.slow.Load() {
			n = 1
		}
		n, err := src.Read(buf[:n])
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
		if p.slow.Load() {
			select {
			case <-p.done:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func (p *throttleProxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// newProxiedCluster is newTestCluster over HTTP where every node is
// reached through a throttleProxy of its own (its peers dial the proxy;
// it listens behind it).
func newProxiedCluster(t testing.TB, size int, tune func(*Config)) (*testCluster, map[uint64]*throttleProxy) {
	c := &testCluster{t: t, peers: map[uint64]string{}, lns: map[uint64]net.Listener{},
		dirs: map[uint64]string{}, nodes: map[uint64]*Node{}, tune: tune}
	proxies := map[uint64]*throttleProxy{}
	base := t.TempDir()
	for id := uint64(1); id <= uint64(size); id++ {
		c.dirs[id] = filepath.Join(base, fmt.Sprintf("node%d", id))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		proxies[id] = newThrottleProxy(t, ln.Addr().String())
		c.lns[id], c.peers[id] = ln, proxies[id].addr()
	}
	for id := range c.peers {
		c.start(id)
	}
	t.Cleanup(c.closeAll)
	return c, proxies
}

// A follower whose log fsync stalls for 10 s and a peer that reads one
// byte a second, both at once in a group of five, never stall the
// leader's clients: it goes on committing and acknowledging with the
// quorum of the three healthy nodes (itself among them), and the two
// catch up once their faults end.
func TestFrozenDiskAndSlowPeerDoNotStallTheLeader(t *testing.T) {
	disks := map[uint64]*faultLogFS{}
	for id := uint64(1); id <= 5; id++ {
		disks[id] = &faultLogFS{}
	}
	c, proxies := newProxiedCluster(t, 5, func(cfg *Config) {
		patientTiming(cfg)
		cfg.logFS = disks[cfg.ID]
	})
	s, leader := c.session()
	mustPut(t, s, "before", "faults")
	var followers []uint64
	for id := uint64(1); id <= 5; id++ {
		if id != leader {
			followers = append(followers, id)
		}
	}
	frozen, slow := followers[0], followers[1]
	for _, id := range []uint64{frozen, slow} {
		waitFor(t, fmt.Sprintf("node %d to apply", id), func() bool {
			v, err := stateGet(c.nodes[id], "before")
			return err == nil && v == "faults"
		})
	}

	disks[frozen].freeze()
	thaw := time.AfterFunc(10*time.Second, disks[frozen].thaw)
	t.Cleanup(func() { thaw.Stop(); disks[frozen].thaw() })
	proxies[slow].slow.Store(true)

	// Write until the disk thaws, checking once, well into the stall,
	// that the commits went without the two.
	const want = 100
	acked := 0
	for i := 0; ; i++ {
		mustPut(t, s, fmt.Sprintf("k%04d", i), "v")
		if isFrozen, _ := disks[frozen].holding(); !isFrozen {
			break
		}
		if acked++; acked != want {
			continue
		}
		if _, stuck := disks[frozen].holding(); stuck == 0 {
			t.Fatal("no fdatasync of the frozen follower was held: the fault did not bite")
		}
		st := c.nodes[leader].Status()
		for _, m := range st.Members {
			if (m.ID == frozen || m.ID == slow) && m.Match >= st.Commit {
				t.Fatalf("member %d matches the commit index %d (%+v) during its fault", m.ID, st.Commit, m)
			}
		}
	}
	if acked < want {
		t.Fatalf("the leader acknowledged %d writes during the follower's 10 s stall; want at least %d: it waited for the frozen disk or the slow peer", acked, want)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("the leader's Session ended during the faults: %v", err)
	}
	t.Logf("the leader acknowledged %d writes while the follower's disk was frozen", acked)

	proxies[slow].slow.Store(false)
	mustPut(t, s, "after", "faults")
	for _, id := range []uint64{frozen, slow} {
		waitFor(t, fmt.Sprintf("node %d to catch up", id), func() bool {
			v, err := stateGet(c.nodes[id], "after")
			return err == nil && v == "faults"
		})
	}
}
