package raftstore

import (
	"os"
	"path/filepath"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
)

// memNet is an in-process network for tests: frames go through a
// goroutine per directed link (so each link keeps its order), and links
// can be cut to partition a node off.
type memNet struct {
	mu    sync.Mutex // guards the fields below
	nodes map[uint64]handler
	links map[[2]uint64]chan *frame
	cut   map[uint64]bool // nodes cut off from every other
	done  chan struct{}
}

func newMemNet() *memNet {
	return &memNet{nodes: map[uint64]handler{}, links: map[[2]uint64]chan *frame{},
		cut: map[uint64]bool{}, done: make(chan struct{})}
}

// isolate cuts (true) or heals (false) every link of id.
func (m *memNet) isolate(id uint64, cut bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cut[id] = cut
}

func (m *memNet) stop() { close(m.done) }

// memTransport is one node's end of a memNet.
type memTransport struct {
	net *memNet
	id  uint64
}

func (m *memNet) transport(id uint64) *memTransport { return &memTransport{net: m, id: id} }

func (t *memTransport) start(h handler) error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.net.nodes[t.id] = h
	return nil
}

// link returns the queue of frames from one node to another, starting its
// delivery goroutine.
func (m *memNet) link(from, to uint64) chan *frame {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]uint64{from, to}
	ch, ok := m.links[k]
	if !ok {
		ch = make(chan *frame, sendQueueLen)
		m.links[k] = ch
		go m.deliver(from, to, ch)
	}
	return ch
}

func (m *memNet) deliver(from, to uint64, ch chan *frame) {
	for {
		select {
		case <-m.done:
			return
		case f := <-ch:
			m.mu.Lock()
			h, blocked := m.nodes[to], m.cut[from] || m.cut[to]
			m.mu.Unlock()
			if h != nil && !blocked {
				h.receive(f)
			}
		}
	}
}

func (m *memNet) reachable(from, to uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[to] != nil && !m.cut[from] && !m.cut[to]
}

func (t *memTransport) send(group, to uint64, msgs []pb.Message) {
	f := &frame{group: group, from: t.id, to: to, msgs: append([]pb.Message(nil), msgs...)}
	t.net.mu.Lock()
	h := t.net.nodes[t.id]
	t.net.mu.Unlock()
	if h != nil {
		h.stamp(f)
	}
	select {
	case t.net.link(t.id, to) <- f:
	default:
		if h != nil {
			h.unreachable(to)
		}
	}
}

func (t *memTransport) sendSnapshot(group uint64, m pb.Message, checkpoint func(dir string) error, done func(ok bool)) {
	go func() {
		t.net.mu.Lock()
		to := t.net.nodes[m.To]
		t.net.mu.Unlock()
		if to == nil || !t.net.reachable(t.id, m.To) {
			done(false)
			return
		}
		dir, err := to.newScratch(group, "in")
		if err == nil {
			err = os.Remove(dir)
		}
		if err == nil {
			err = checkpoint(dir)
		}
		if err == nil {
			err = to.receiveSnapshot(group, m, dir)
		}
		if err != nil {
			os.RemoveAll(dir)
		}
		done(err == nil)
	}()
}

func (t *memTransport) setPeer(uint64, uint64, string) {}
func (t *memTransport) removePeer(uint64, uint64)      {}
func (t *memTransport) addr() string                   { return filepath.Join("mem", string(rune('0'+t.id))) }

func (t *memTransport) close() error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	delete(t.net.nodes, t.id)
	return nil
}
