package clustersoak

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// balancer is the TCP load balancer in front of the cluster: every
// client connects to it, and it connects each to the next node that is
// up and accepts (round robin). Marking a node down, as a real
// balancer's health check would, resets the connections it had to it.
type balancer struct {
	l     net.Listener
	nodes []*backend
	next  atomic.Uint64
	wg    sync.WaitGroup
}

type backend struct {
	addr string
	up   atomic.Bool

	mu    sync.Mutex // guards conns
	conns map[net.Conn]net.Conn
}

func newBalancer(addrs []string) (*balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{l: l}
	for _, a := range addrs {
		be := &backend{addr: a, conns: map[net.Conn]net.Conn{}}
		be.up.Store(true)
		b.nodes = append(b.nodes, be)
	}
	b.wg.Go(b.accept)
	return b, nil
}

func (b *balancer) addr() string { return b.l.Addr().String() }

func (b *balancer) accept() {
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.serve(c) })
	}
}

// serve connects c to a node that is up, trying each once.
func (b *balancer) serve(c net.Conn) {
	start := int(b.next.Add(1))
	for i := range b.nodes {
		be := b.nodes[(start+i)%len(b.nodes)]
		if !be.up.Load() {
			continue
		}
		s, err := net.DialTimeout("tcp", be.addr, time.Second)
		if err != nil {
			continue
		}
		be.mu.Lock()
		if !be.up.Load() {
			be.mu.Unlock()
			s.Close()
			continue
		}
		be.conns[c] = s
		be.mu.Unlock()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
		<-done
		c.Close()
		s.Close()
		<-done
		be.mu.Lock()
		delete(be.conns, c)
		be.mu.Unlock()
		return
	}
	c.Close()
}

// setUp marks node i (0-based) up or down; down resets its connections.
func (b *balancer) setUp(i int, up bool) {
	be := b.nodes[i]
	be.mu.Lock()
	be.up.Store(up)
	var cut []net.Conn
	if !up {
		for c, s := range be.conns {
			cut = append(cut, c, s)
		}
	}
	be.mu.Unlock()
	for _, c := range cut {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a balancer's would be
		}
		c.Close()
	}
}

func (b *balancer) close() {
	b.l.Close()
	for i := range b.nodes {
		b.setUp(i, false)
	}
	b.wg.Wait()
}
