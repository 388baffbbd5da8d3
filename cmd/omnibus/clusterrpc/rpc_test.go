package clusterrpc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// rig is a routed broker whose entities live in a broker behind a real
// loopback connection (group 1 of a "remote node").
type rig struct {
	routed *core.Broker
	remote *coretest.Env // the remote node's group broker
	valid  atomic.Bool   // the remote group's lease
	srv    *Server
	ln     net.Listener
	client *Client
}

type rigRouter struct {
	r  *rig
	be core.Backend
}

func (x *rigRouter) Route(string) (core.Backend, error)                  { return x.be, nil }
func (x *rigRouter) Place(context.Context, string) (core.Backend, error) { return x.be, nil }
func (x *rigRouter) All() ([]core.Backend, error)                        { return []core.Backend{x.be}, nil }
func (x *rigRouter) Local() []core.Backend                               { return nil }

func newRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{remote: coretest.New(t)}
	r.valid.Store(true)
	r.srv = NewServer(func(g uint64) (Group, bool) {
		if g != 1 {
			return Group{}, false
		}
		return Group{Broker: r.remote.Broker, Valid: r.valid.Load}, true
	}, zaptest.NewLogger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.ln = ln
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go r.srv.Serve(nc, nil, 7)
		}
	}()
	r.client = NewClient(func(ctx context.Context) (net.Conn, *bufio.Reader, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		return nc, nil, err
	}, zaptest.NewLogger(t))
	rt := &rigRouter{r: r}
	r.routed, err = core.New(core.Config{Router: rt})
	if err != nil {
		t.Fatal(err)
	}
	rt.be = NewBackend(r.client, 1, r.routed)
	t.Cleanup(func() {
		r.client.Close()
		ln.Close()
		r.srv.Close()
		r.routed.Close()
	})
	return r
}

func TestRemoteBackendCarriesEveryOperation(t *testing.T) {
	r := newRig(t)
	b := r.routed
	ctx := t.Context()
	mustCreate := func(e core.Entity) {
		t.Helper()
		if _, err := b.CreateEntity(ctx, e); err != nil {
			t.Fatalf("create %s: %v", e.Path(), err)
		}
	}
	mustCreate(core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute})
	mustCreate(core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	mustCreate(core.Entity{Kind: core.KindTopic, Name: "t"})
	mustCreate(core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "red", Rules: []core.Rule{{Name: "r",
		Filter: core.Filter{Kind: core.FilterCorrelation, Correlation: &core.CorrelationFilter{Properties: map[string]any{"n": int32(7)}}}}}})
	rules, err := b.ListRules("t/Subscriptions/red")
	if err != nil || len(rules) != 1 || rules[0].Filter.Correlation.Properties["n"] != int32(7) {
		t.Fatalf("rules came back as %+v, %v: property types must survive", rules, err)
	}
	// Sends keep their order, through SendAsync as a front makes them.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		m := &core.Message{Body: []byte{byte('a' + i)}, ApplicationProperties: map[string]any{"i": int64(i), "at": time.Unix(5, 0).UTC()}}
		if err := b.SendAsync("q", []*core.Message{m}, func(seqs []int64, err error) {
			defer wg.Done()
			if err != nil || len(seqs) != 1 {
				t.Errorf("send %d: %v %v", i, seqs, err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	got, err := b.Receive(ctx, "q", core.ReceiveOptions{Max: 20})
	if err != nil {
		t.Fatal(err)
	}
	for len(got) < 20 {
		more, err := b.Receive(ctx, "q", core.ReceiveOptions{Max: 20})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, more...)
	}
	for i, m := range got {
		if m.Body[0] != byte('a'+i) || m.ApplicationProperties["i"] != int64(i) || m.LockToken == (core.LockToken{}) {
			t.Fatalf("message %d: %q %v lock %v", i, m.Body, m.ApplicationProperties, m.LockToken)
		}
	}
	var toks []core.LockToken
	for _, m := range got[2:] {
		toks = append(toks, m.LockToken)
	}
	toks = append(toks, core.NewUUID())
	errs := b.CompleteMany("q", toks, true)
	for _, e := range errs[:len(errs)-1] {
		if e != nil {
			t.Fatalf("complete: %v", e)
		}
	}
	if !errors.Is(errs[len(errs)-1], core.ErrLockLost) {
		t.Errorf("an unknown token: %v, want lock lost (its code crosses)", errs[len(errs)-1])
	}
	if err := b.Settle(ctx, "q", got[0].LockToken, core.Outcome{Kind: core.Defer}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RenewLock(ctx, "q", got[1].LockToken); err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(ctx, "q", got[1].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "r",
		Properties: map[string]any{"k": uint16(3)}}); err != nil {
		t.Fatal(err)
	}
	dl, err := b.Peek(ctx, "q/$DeadLetterQueue", core.PeekOptions{Max: 5})
	if err != nil || len(dl) != 1 || dl[0].ApplicationProperties["k"] != uint16(3) {
		t.Fatalf("dead letter: %v, %v", dl, err)
	}
	def, err := b.ReceiveDeferred(ctx, "q", core.ReceiveAndDelete, []int64{got[0].SequenceNumber})
	if err != nil || len(def) != 1 {
		t.Fatalf("deferred: %v, %v", def, err)
	}
	if c, err := b.Counts("q"); err != nil || c.Active != 0 || c.DeadLetter != 1 {
		t.Fatalf("counts %+v, %v", c, err)
	}
	// Sessions.
	if _, err := b.Send(ctx, "sq", &core.Message{Body: []byte("s"), SessionID: "x"}); err != nil {
		t.Fatal(err)
	}
	sl, err := b.AcceptSession(ctx, "sq", "")
	if err != nil || sl.SessionID != "x" {
		t.Fatalf("accept: %v %v", sl, err)
	}
	if err := b.SetSessionState(ctx, "sq", sl, []byte{}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetSessionState(ctx, "sq", sl, []byte("state")); err != nil {
		t.Fatal(err)
	}
	if st, err := b.GetSessionState(ctx, "sq", sl); err != nil || string(st) != "state" {
		t.Fatalf("session state: %q %v", st, err)
	}
	ids, err := b.ListSessions(ctx, "sq", time.Time{})
	if err != nil || !slices.Equal(ids, []string{"x"}) {
		t.Fatalf("sessions: %v %v", ids, err)
	}
	if err := b.CloseSession("sq", sl); err != nil {
		t.Fatal(err)
	}
	// A transaction on the remote group.
	txn := b.BeginTxn()
	if err := txn.Send("q", "", []*core.Message{{Body: []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	if txn.Deadline().IsZero() || txn.Entity() != "q" {
		t.Errorf("deadline %v entity %q", txn.Deadline(), txn.Entity())
	}
	if c, _ := r.remote.Broker.Counts("q"); c.Active != 0 {
		t.Fatal("visible before the commit")
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.remote.Broker.Counts("q"); c.Active != 1 {
		t.Fatalf("after the commit: %+v", c)
	}
	qs, err := b.ListEntities(core.KindQueue, "")
	if err != nil || len(qs) != 2 {
		t.Fatalf("list: %v %v", qs, err)
	}
	if err := b.DeleteEntity(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := r.remote.Broker.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteReceiveWaitsAndIsCancelled(t *testing.T) {
	r := newRig(t)
	b := r.routed
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []*core.Message, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		msgs, err := b.Receive(ctx, "q", core.ReceiveOptions{Max: 1, Mode: core.ReceiveAndDelete})
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	waitForWaiter(t, r.remote.Broker)
	if _, err := r.remote.Broker.Send(t.Context(), "q", coretest.Text("later")); err != nil {
		t.Fatal(err)
	}
	if msgs := <-got; len(msgs) != 1 || string(msgs[0].Body) != "later" {
		t.Fatalf("waiting receive got %v", msgs)
	}
	// A receive whose context ends returns nothing and leaves nothing
	// taken at the server.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.Receive(ctx, "q", core.ReceiveOptions{Max: 1})
		done <- err
	}()
	waitForWaiter(t, r.remote.Broker)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled receive: %v", err)
	}
	if _, err := r.remote.Broker.Send(t.Context(), "q", coretest.Text("kept")); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := r.remote.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete}); len(msgs) != 1 {
		t.Fatal("a message sent after the cancelled receive is not there")
	}
}

// waitForWaiter waits until a receive waits on b's queue "q".
func waitForWaiter(t *testing.T, b *core.Broker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.Waiting("q") {
		if time.Now().After(deadline) {
			t.Fatal("no receive came to wait")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRemoteAnswersAreFenced(t *testing.T) {
	r := newRig(t)
	b := r.routed
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), "q", coretest.Text("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), "q", coretest.Text("y")); err != nil {
		t.Fatal(err)
	}
	locked, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 1})
	if err != nil || len(locked) != 1 {
		t.Fatalf("receive: %v, %v", locked, err)
	}
	r.valid.Store(false) // the remote node lost its lease
	msgs, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 1})
	if !errors.Is(err, core.ErrServerBusy) || len(msgs) != 0 {
		t.Fatalf("a deposed leader's answer: %v, %v; want nothing and server busy", msgs, err)
	}
	if _, err := b.RenewLock(t.Context(), "q", locked[0].LockToken); !errors.Is(err, core.ErrServerBusy) {
		t.Fatalf("a lock renewed by a deposed leader: %v, want server busy", err)
	}
}

// TestCommittedAnswersAreNotFenced: a send or a completion the group's
// store committed holds whoever leads afterwards, so its answer goes out
// even once the lease ended. Fenced, a completion that took effect came
// back as a failure (lock lost: the message never came back), and a
// stored send as one the client sends again.
func TestCommittedAnswersAreNotFenced(t *testing.T) {
	r := newRig(t)
	b := r.routed
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), "q", coretest.Text("x")); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v, %v", msgs, err)
	}
	r.valid.Store(false) // the lease ends as the writes commit
	for _, err := range b.CompleteMany("q", []core.LockToken{msgs[0].LockToken}, true) {
		if err != nil {
			t.Fatalf("a completion the store committed: %v, want it confirmed", err)
		}
	}
	if _, err := b.Send(t.Context(), "q", coretest.Text("y")); err != nil {
		t.Fatalf("a send the store committed: %v, want it acknowledged", err)
	}
	r.valid.Store(true)
	got, err := r.remote.Broker.Peek(t.Context(), "q", core.PeekOptions{Max: 10})
	if err != nil || len(got) != 1 || string(got[0].Body) != "y" {
		t.Fatalf("the queue holds %v (%v), want the one message sent after the completion", got, err)
	}
}

func TestRemoteBrokenConnection(t *testing.T) {
	r := newRig(t)
	b := r.routed
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := b.Receive(ctx, "q", core.ReceiveOptions{Max: 1})
		done <- err
	}()
	waitForWaiter(t, r.remote.Broker)
	r.srv.Close() // the remote node goes away
	if err := <-done; !errors.Is(err, core.ErrServerBusy) || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("a receive cut off: %v, want server busy", err)
	}
}

// TestSilentPeerFailsCalls: a peer that takes the connection and never
// answers (frozen, cut off without a reset) fails the calls under way once
// nothing came for silenceLimit, and FailGroup fails a group's calls at
// once (its caller saw another leader elected).
func TestSilentPeerFailsCalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, nc) }() // reads, never answers
		}
	}()
	c := NewClient(func(ctx context.Context) (net.Conn, *bufio.Reader, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		return nc, nil, err
	}, zaptest.NewLogger(t))
	c.pingEvery, c.silence = 50*time.Millisecond, 300*time.Millisecond
	defer c.Close()
	home, err := core.New(core.Config{Router: &rigRouter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer home.Close()
	be := NewBackend(c, 1, home)
	start := time.Now()
	_, err = be.Send(t.Context(), "q", coretest.Text("x"))
	if !errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("a send to a silent peer: %v, want outcome unknown", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the send failed only after %v", d)
	}
	done := make(chan error, 1)
	go func() {
		_, err := be.Receive(t.Context(), "q", core.ReceiveOptions{})
		done <- err
	}()
	for {
		c.mu.Lock()
		cc := c.cur
		c.mu.Unlock()
		if cc != nil {
			cc.mu.Lock()
			n := len(cc.pending)
			cc.mu.Unlock()
			if n > 0 {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
	c.FailGroup(1)
	if err := <-done; !errors.Is(err, core.ErrServerBusy) {
		t.Fatalf("a receive of a group whose leader changed: %v, want server busy", err)
	}
}

// receiveThroughProxy starts a peek-lock receive of one message from
// queue "q" (a minute's lock) through a holding proxy to the remote
// broker, and returns once the remote broker holds it waiting; done has
// the receive's error when it ends. The caller closes the client.
func receiveThroughProxy(t *testing.T) (*rig, *holdingProxy, *Client, chan error) {
	t.Helper()
	r := newRig(t)
	if _, err := r.routed.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p := newHoldingProxy(t, r.ln.Addr().String())
	c := NewClient(func(ctx context.Context) (net.Conn, *bufio.Reader, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", p.addr())
		return nc, nil, err
	}, zaptest.NewLogger(t))
	be := NewBackend(c, 1, r.routed)
	done := make(chan error, 1)
	go func() {
		_, err := be.Receive(t.Context(), "q", core.ReceiveOptions{Max: 1, Mode: core.PeekLock})
		done <- err
	}()
	waitForWaiter(t, r.remote.Broker)
	return r, p, c, done
}

// TestLateReceiveAnswerGivesItsLocksBack: a peek-lock receive whose call
// failed (FailGroup: the caller saw another leader elected, perhaps
// wrongly) and whose answer comes afterwards gives the messages it took
// back at once. Nobody will deliver them: kept, their locks would hide
// them from every receiver until they expired (a minute, by default).
func TestLateReceiveAnswerGivesItsLocksBack(t *testing.T) {
	r, p, c, done := receiveThroughProxy(t)
	defer c.Close()
	// The server answers with a locked message; the answer is held on
	// its way while the caller gives the call up.
	p.hold(true)
	if _, err := r.remote.Broker.Send(t.Context(), "q", coretest.Text("late")); err != nil {
		t.Fatal(err)
	}
	for r.remote.Broker.Waiting("q") {
		time.Sleep(time.Millisecond)
	}
	c.FailGroup(1)
	if err := <-done; !errors.Is(err, core.ErrServerBusy) {
		t.Fatalf("a receive of a group whose leader changed: %v, want server busy", err)
	}
	p.hold(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs, err := r.remote.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 1, Mode: core.PeekLock})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			if string(msgs[0].Body) != "late" || msgs[0].DeliveryCount != 1 {
				t.Fatalf("got %q delivered %d times, want the late answer's message, its first delivery", msgs[0].Body, msgs[0].DeliveryCount)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the message of the answer that came after its call failed is still locked")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdingProxy forwards TCP connections to a server; while holding, what
// the server sends waits in the proxy.
type holdingProxy struct {
	ln   net.Listener
	gate sync.RWMutex // held (locked) while the server's bytes wait
	held atomic.Bool

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

// cut closes every connection through the proxy, both ends.
func (p *holdingProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func newHoldingProxy(t *testing.T, to string) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{ln: ln}
	t.Cleanup(func() {
		p.hold(false)
		ln.Close()
	})
	go func() {
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			sn, err := net.Dial("tcp", to)
			if err != nil {
				cn.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, cn, sn)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(sn, cn); sn.Close() }()
			go func() {
				defer cn.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := sn.Read(buf)
					if n > 0 {
						p.gate.RLock()
						_, werr := cn.Write(buf[:n])
						p.gate.RUnlock()
						if werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *holdingProxy) addr() string { return p.ln.Addr().String() }

func (p *holdingProxy) hold(on bool) {
	if p.held.Swap(on) == on {
		return
	}
	if on {
		p.gate.Lock()
	} else {
		p.gate.Unlock()
	}
}

// TestUnacknowledgedReceiveGivesItsLocksBack: the messages of a peek-lock
// receive answer whose arrival the caller never acknowledged are released
// when the connection ends: the caller's node died (or was cut off) with
// them, and nobody would settle them before their locks expired (a
// minute, by default), hidden from every receiver meanwhile.
func TestUnacknowledgedReceiveGivesItsLocksBack(t *testing.T) {
	r, p, c, done := receiveThroughProxy(t)
	defer c.Close()
	p.hold(true) // the answer never arrives
	if _, err := r.remote.Broker.Send(t.Context(), "q", coretest.Text("lost on its way")); err != nil {
		t.Fatal(err)
	}
	for r.remote.Broker.Waiting("q") {
		time.Sleep(time.Millisecond)
	}
	p.cut() // the caller's node dies
	if err := <-done; !errors.Is(err, core.ErrServerBusy) {
		t.Fatalf("a receive whose connection broke: %v, want server busy", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs, err := r.remote.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 1, Mode: core.PeekLock})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			if msgs[0].DeliveryCount != 1 {
				t.Fatalf("delivered %d times, want its first delivery (the lost one released, not counted)", msgs[0].DeliveryCount)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the message of an answer that never arrived is still locked")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
