package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// proxyDialTimeout bounds a follower's dial of the leader's listener.
const proxyDialTimeout = 2 * time.Second

// proxier moves a follower's client connections to the leader, byte for
// byte (TLS stays end to end between the client and the leader), and cuts
// them when the leader changes so that clients reconnect to the new one.
type proxier struct {
	cl  *Cluster
	sem chan struct{} // one token per proxied connection (MaxProxied)

	mu      sync.Mutex // guards the fields below
	pipes   map[*pipe]struct{}
	info    map[uint64]map[string]string // a member's client addresses, by id
	refused int                          // connections refused at the cap, since the last log line
	piped   map[string]int64             // connections piped to a leader, by front, since the start
}

// pipe is one proxied connection: the client's and the leader's sockets.
type pipe struct {
	leader         uint64
	client, server net.Conn
}

// proxied is how many client connections of front this node has piped
// to a leader since it started.
func (p *proxier) proxied(front string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.piped[front]
}

func newProxier(cl *Cluster) *proxier {
	return &proxier{cl: cl, sem: make(chan struct{}, cl.copts.MaxProxied), pipes: map[*pipe]struct{}{},
		info: map[uint64]map[string]string{}, piped: map[string]int64{}}
}

// handle proxies conn, or closes it at once when MaxProxied connections
// are already proxied.
func (p *proxier) handle(front string, conn net.Conn) {
	select {
	case p.sem <- struct{}{}:
	default:
		conn.Close()
		p.mu.Lock()
		p.refused++
		n := p.refused
		p.mu.Unlock()
		if n == 1 || n%1000 == 0 {
			p.cl.log.Warn("refusing client connections: the cap of proxied connections is reached",
				zap.Int("max", p.cl.copts.MaxProxied), zap.Int("refused", n))
		}
		return
	}
	go func() {
		defer func() { <-p.sem }()
		p.run(front, conn)
	}()
}

// run waits (up to ProxyWait) for a leader, then pipes conn to it. If this
// node becomes the one serving meanwhile, conn goes to the local broker.
func (p *proxier) run(front string, conn net.Conn) {
	node := p.cl.node
	deadline := time.Now().Add(p.cl.copts.ProxyWait)
	for {
		changed := node.Changed()
		if p.cl.serveLocally(front, conn) {
			return
		}
		if leader := node.Leader(); leader != 0 && leader != node.ID() {
			if up, err := p.dial(leader, front); err == nil {
				p.pipe(leader, front, conn, up)
				return
			} else if time.Now().After(deadline) {
				p.cl.log.Debug("cannot reach the leader for a client", zap.Uint64("leader", leader), zap.Error(err))
			}
		}
		if time.Now().After(deadline) {
			conn.Close()
			return
		}
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		case <-p.cl.ctx.Done():
			conn.Close()
			return
		}
	}
}

// dial connects to the leader's listener for front.
func (p *proxier) dial(leader uint64, front string) (net.Conn, error) {
	addr, err := p.clientAddr(leader, front)
	if err != nil {
		return nil, err
	}
	up, err := net.DialTimeout("tcp", addr, proxyDialTimeout)
	if err != nil {
		p.forget(leader)
		return nil, err
	}
	return up, nil
}

// clientAddr is a member's address for front, asked of it over the peer
// transport and cached until a dial fails.
func (p *proxier) clientAddr(id uint64, front string) (string, error) {
	p.mu.Lock()
	info := p.info[id]
	p.mu.Unlock()
	if info == nil {
		peer := p.peerAddr(id)
		if peer == "" {
			return "", fmt.Errorf("no address for member %d", id)
		}
		ctx, cancel := context.WithTimeout(p.cl.ctx, proxyDialTimeout)
		st, err := p.cl.node.PeerClient().Status(ctx, peer)
		cancel()
		if err != nil {
			return "", err
		}
		info = st.Client
		p.mu.Lock()
		p.info[id] = info
		p.mu.Unlock()
	}
	addr := info[front]
	if addr == "" {
		return "", fmt.Errorf("member %d has no %s listener", id, front)
	}
	return addr, nil
}

// peerAddr is a member's peer transport address.
func (p *proxier) peerAddr(id uint64) string {
	if a := p.cl.copts.Peers[id]; a != "" {
		return a
	}
	for _, m := range p.cl.node.Status().Members {
		if m.ID == id {
			return m.Addr
		}
	}
	return ""
}

func (p *proxier) forget(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.info, id)
}

// pipe copies both ways until either side ends, then closes both.
func (p *proxier) pipe(leader uint64, front string, client, server net.Conn) {
	pp := &pipe{leader: leader, client: client, server: server}
	p.mu.Lock()
	p.pipes[pp] = struct{}{}
	p.piped[front]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pipes, pp)
		p.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(server, client)
	go cp(client, server)
	<-done
	client.Close()
	server.Close()
	<-done
}

// watch cuts proxied connections whose leader is no longer the leader.
func (p *proxier) watch() {
	node := p.cl.node
	for {
		select {
		case <-node.Changed():
		case <-p.cl.ctx.Done():
			return
		}
		leader := node.Leader()
		p.mu.Lock()
		var cut []*pipe
		for pp := range p.pipes {
			if pp.leader != leader {
				cut = append(cut, pp)
			}
		}
		p.mu.Unlock()
		for _, pp := range cut {
			pp.client.Close()
			pp.server.Close()
		}
	}
}

// cutAll closes every proxied connection (shutdown).
func (p *proxier) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.pipes {
		pp.client.Close()
		pp.server.Close()
	}
}
