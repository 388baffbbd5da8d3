package amqpserver

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// A link's sends are held while its previous send is in flight
// (link.hold): these tests hold the first send's write inside the store
// and look at what the sends written meanwhile become.

// newFaultTestServer is newTestServer on a broker whose store faults on
// command.
func newFaultTestServer(t *testing.T) (*testServer, *coretest.FaultStore) {
	t.Helper()
	env, fs := coretest.NewFault(t)
	srv, addr := serveBrokerOf(t, env)
	return &testServer{Env: env, srv: srv, addr: addr}, fs
}

// storeGate holds the first write to reach the store until opened, and
// counts the writes.
type storeGate struct {
	entered chan struct{} // closed when the first write is held
	open    chan struct{} // closed to let it through (release)
	opened  sync.Once
	fail    error // what the held write fails with, if not nil
	mu      sync.Mutex
	writes  int
}

// holdFirstWrite holds the next write to reach fs until release (or the
// test's end), failing it with fail if not nil.
func holdFirstWrite(t *testing.T, fs *coretest.FaultStore, fail error) *storeGate {
	g := &storeGate{entered: make(chan struct{}), open: make(chan struct{}), fail: fail}
	t.Cleanup(g.release) // before the server's shutdown, which waits for the write
	fs.OnApply(func(*storage.Batch) error {
		g.mu.Lock()
		g.writes++
		first := g.writes == 1
		g.mu.Unlock()
		if !first {
			return nil
		}
		close(g.entered)
		<-g.open
		return g.fail
	})
	return g
}

func (g *storeGate) release() { g.opened.Do(func() { close(g.open) }) }

func (g *storeGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes
}

// holdPeer is a raw client with a sender attached to queue "hold"
// (unsettled), which notes the answers to its deliveries as they come.
type holdPeer struct {
	*rawPeer
	states map[uint32]frames.DeliveryState
	order  []string // "disposition" and the other frames' types, as read
}

func dialHoldPeer(t *testing.T, ts *testServer) *holdPeer {
	p := &holdPeer{rawPeer: ts.rawDial(t), states: map[uint32]frames.DeliveryState{}}
	p.open()
	p.writeFrame(0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10})
	p.readFrame() // begin
	p.writeFrame(0, senderAttach("hold"))
	p.readFrame() // attach
	if fl, ok := p.readFrame().(*frames.Flow); !ok || fl.LinkCredit == nil || *fl.LinkCredit < 100 {
		t.Fatalf("attach followed by %+v, want a flow with credit", fl)
	}
	return p
}

// transfer is delivery id, a message whose body is its number.
func (p *holdPeer) transfer(id uint32) *frames.Transfer {
	var b buffer.Buffer
	m := &frames.Message{Data: [][]byte{[]byte(fmt.Sprint(id))}}
	if err := m.MarshalAMQP(&b); err != nil {
		p.t.Fatal(err)
	}
	return transferFrame(0, id, true, false, b.Bytes())
}

// read reads one frame and notes it; it returns its type's name.
func (p *holdPeer) read() string {
	p.t.Helper()
	switch f := p.readFrame().(type) {
	case *frames.Disposition:
		last := f.First
		if f.Last != nil {
			last = *f.Last
		}
		for id := f.First; id <= last; id++ {
			p.states[id] = f.State
		}
		p.order = append(p.order, "disposition")
		return "disposition"
	case *frames.Flow:
		if f.Handle == nil {
			return "session flow"
		}
		return "link flow"
	case *frames.Detach:
		p.order = append(p.order, "detach")
		return "detach"
	default:
		return fmt.Sprintf("%T", f)
	}
}

// sync makes a round trip through the connection goroutine (an echoed
// session flow), noting what arrives meanwhile.
func (p *holdPeer) sync() {
	p.t.Helper()
	next := uint32(0)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &next, IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, Echo: true})
	for p.read() != "session flow" {
	}
}

// awaitAnswers reads until deliveries 0..n-1 are all answered.
func (p *holdPeer) awaitAnswers(n int) {
	p.t.Helper()
	for len(p.states) < n {
		p.read()
	}
}

func awaitHeld(t *testing.T, g *storeGate) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first send never reached the store")
	}
}

// TestSendsHeldWhileOneIsInFlight: deliveries that arrive, pass after
// pass, while the link's previous send is being written go to the broker
// as one send once it is durable (two store writes for all of them, not
// one per pass), each answered accepted only after its write, and stored
// in the order they were sent. When the write in flight fails, its
// delivery is rejected and the held ones still go.
func TestSendsHeldWhileOneIsInFlight(t *testing.T) {
	const n = 12
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			ts, fs := newFaultTestServer(t)
			ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "hold"})
			var failWith error
			if fail {
				failWith = fmt.Errorf("test disk: %w", storage.ErrNoSpace)
			}
			g := holdFirstWrite(t, fs, failWith)
			p := dialHoldPeer(t, ts)
			p.writeFrame(0, p.transfer(0))
			awaitHeld(t, g)
			// One delivery per pass: each is handled (the echo comes
			// after it) before the next is written.
			for id := uint32(1); id < n; id++ {
				p.writeFrame(0, p.transfer(id))
				p.sync()
			}
			if len(p.states) != 0 {
				t.Fatalf("answers %v before the first write is done", p.states)
			}
			g.release()
			p.awaitAnswers(n)
			if w := g.count(); w != 2 {
				t.Errorf("%d store writes for %d deliveries, want 2 (the first, then the %d held behind it together)", w, n, n-1)
			}
			for id := uint32(0); id < n; id++ {
				_, accepted := p.states[id].(*frames.Accepted)
				if want := !(fail && id == 0); accepted != want {
					t.Errorf("delivery %d answered %#v, want accepted=%v", id, p.states[id], want)
				}
			}
			var want []string
			for id := range n {
				if !(fail && id == 0) {
					want = append(want, fmt.Sprint(id))
				}
			}
			if got := coretest.Bodies(ts.MustReceive(t, "hold", core.ReceiveAndDelete, 2*n)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("stored %v, want %v (every accepted delivery, in order)", got, want)
			}
		})
	}
}

// TestHeldSendsGoBeforeDetachEndClose: a detach, end or close that
// follows deliveries held behind a send in flight sends them first, and
// is answered only after all of them are stored. After a detach or close
// the client reads every delivery accepted before the answer to it (the
// acknowledgements queued in the pass that answers are written first);
// after its end, which ended its links, the server answers none of them
// but the end.
func TestHeldSendsGoBeforeDetachEndClose(t *testing.T) {
	const n = 12
	for _, last := range []string{"detach", "end", "close"} {
		t.Run(last, func(t *testing.T) {
			ts, fs := newFaultTestServer(t)
			ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "hold"})
			g := holdFirstWrite(t, fs, nil)
			p := dialHoldPeer(t, ts)
			p.writeFrame(0, p.transfer(0))
			awaitHeld(t, g)
			for id := uint32(1); id < n; id++ {
				p.writeFrame(0, p.transfer(id))
				p.sync()
			}
			switch last {
			case "detach":
				p.writeFrame(0, &frames.Detach{Handle: 0, Closed: true})
			case "end":
				p.writeFrame(0, &frames.End{})
			case "close":
				p.writeFrame(0, &frames.Close{})
			}
			// Only once the detach, end or close has been handled does the
			// first write finish.
			if last == "detach" {
				p.sync()
			} else {
				waitFor(t, "the "+last+" to be handled", 10*time.Second, func() bool {
					var handled bool
					ts.onConn(t, func(c *conn) {
						s := c.sessions[0]
						handled = c.closing || s != nil && s.ending
					})
					return handled
				})
			}
			g.release()
			for done := false; !done; {
				switch p.read() {
				case "detach":
					done = last == "detach"
				case "*frames.End":
					done = last == "end"
				case "*frames.Close":
					done = last == "close"
				}
				if done && last != "end" && len(p.states) != n {
					t.Fatalf("the %s answered with %d of %d deliveries answered", last, len(p.states), n)
				}
			}
			for id := range uint32(n) {
				if _, ok := p.states[id].(*frames.Accepted); !ok && last != "end" {
					t.Errorf("delivery %d answered %#v, want accepted", id, p.states[id])
				}
			}
			if c := ts.MustCounts(t, "hold"); c.Active != n {
				t.Errorf("%d messages stored, want %d", c.Active, n)
			}
		})
	}
}

// TestHeldSendsAnsweredAtShutdown: a server shutting down sends the
// deliveries held behind a send in flight and answers all of them before
// its close.
func TestHeldSendsAnsweredAtShutdown(t *testing.T) {
	const n = 12
	ts, fs := newFaultTestServer(t)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "hold"})
	g := holdFirstWrite(t, fs, nil)
	p := dialHoldPeer(t, ts)
	p.writeFrame(0, p.transfer(0))
	awaitHeld(t, g)
	for id := uint32(1); id < n; id++ {
		p.writeFrame(0, p.transfer(id))
		p.sync()
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- ts.srv.Shutdown(ctx)
	}()
	// Shutdown has begun once the listener refuses.
	waitFor(t, "the listener to close", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", ts.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	g.release()
	for p.read() != "*frames.Close" {
	}
	if len(p.states) != n {
		t.Fatalf("closed with %d of %d deliveries answered", len(p.states), n)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if c := ts.MustCounts(t, "hold"); c.Active != n {
		t.Errorf("%d messages stored, want %d", c.Active, n)
	}
}

// TestCompletionsHeldWhileOneIsInFlight: completions a client sends, one
// per pass, while the connection's previous completion is being written
// go to the broker as one once it is done (two store writes for all of
// them), each answered after its write.
func TestCompletionsHeldWhileOneIsInFlight(t *testing.T) {
	const n = 12
	ts, fs := newFaultTestServer(t)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "hold"})
	for i := range n {
		ts.MustSend(t, "hold", &core.Message{Body: []byte(fmt.Sprint(i))})
	}
	p := &holdPeer{rawPeer: ts.rawDial(t), states: map[uint32]frames.DeliveryState{}}
	p.open()
	p.attachRawReceiver("hold", 1<<20, frames.ReceiverSettleModeSecond)
	p.grant(0, 1<<20, 0, n)
	for got := 0; got < n; {
		if _, ok := p.readFrame().(*frames.Transfer); ok {
			got++
		}
	}
	g := holdFirstWrite(t, fs, nil)
	accept := func(id uint32) *frames.Disposition {
		return &frames.Disposition{Role: frames.RoleReceiver, First: id, State: &frames.Accepted{}}
	}
	p.writeFrame(0, accept(0))
	awaitHeld(t, g)
	for id := uint32(1); id < n; id++ {
		p.writeFrame(0, accept(id))
		p.sync()
	}
	if len(p.states) != 0 {
		t.Fatalf("answers %v before the first write is done", p.states)
	}
	g.release()
	p.awaitAnswers(n)
	if w := g.count(); w != 2 {
		t.Errorf("%d store writes for %d completions, want 2 (the first, then the %d held behind it together)", w, n, n-1)
	}
	for id := range uint32(n) {
		if _, ok := p.states[id].(*frames.Accepted); !ok {
			t.Errorf("delivery %d answered %#v, want accepted", id, p.states[id])
		}
	}
	if c := ts.MustCounts(t, "hold"); c.Total != 0 {
		t.Errorf("counts %+v after every message was completed", c)
	}
}
