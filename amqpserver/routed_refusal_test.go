package amqpserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A routed broker (a cluster with data groups, core.Config.Router) whose
// entity's group is changing leaders refuses for now: the answers must be
// ones the SDKs act on correctly.

// refusingBackend is a broker whose receives and settlements can be
// refused with server busy, as a group changing leaders refuses them.
type refusingBackend struct {
	core.Backend
	refuse atomic.Bool
}

var errMoving = &core.Error{Code: core.CodeServerBusy, Msg: "the entity's group (1) is changing leaders; retry"}

func (b *refusingBackend) Receive(ctx context.Context, path string, opts core.ReceiveOptions) ([]*core.Message, error) {
	if b.refuse.Load() {
		return nil, errMoving
	}
	return b.Backend.Receive(ctx, path, opts)
}

func (b *refusingBackend) Settle(ctx context.Context, path string, tok core.LockToken, o core.Outcome) error {
	if b.refuse.Load() {
		return errMoving
	}
	return b.Backend.Settle(ctx, path, tok, o)
}

func (b *refusingBackend) CompleteMany(path string, toks []core.LockToken, durable bool) []error {
	if b.refuse.Load() {
		errs := make([]error, len(toks))
		for i := range errs {
			errs[i] = errMoving
		}
		return errs
	}
	return b.Backend.CompleteMany(path, toks, durable)
}

type oneBackend struct{ be core.Backend }

func (r oneBackend) Route(string) (core.Backend, error)                  { return r.be, nil }
func (r oneBackend) Place(context.Context, string) (core.Backend, error) { return r.be, nil }
func (r oneBackend) All() ([]core.Backend, error)                        { return []core.Backend{r.be}, nil }
func (r oneBackend) Local() []core.Backend                               { return []core.Backend{r.be} }

// backendClock is the clock of a backend broker, for the routed broker in
// front of it: in a cluster both read the same time, and the front
// compares a session lock's expiry, set by the backend, with the routed
// broker's Now.
type backendClock struct{ b *core.Broker }

func (c backendClock) Now() time.Time { return time.Unix(0, c.b.Now()) }

func (c backendClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real{}.AfterFunc(d, f)
}

// newRoutedTestServer serves a routed broker whose one backend is the
// test server's broker behind a refusingBackend.
func newRoutedTestServer(t *testing.T) (*testServer, *refusingBackend) {
	t.Helper()
	be := &refusingBackend{}
	ts := newTestServer(t, func(c *Config) {
		be.Backend = c.Broker
		routed, err := core.New(core.Config{Router: oneBackend{be}, Clock: backendClock{c.Broker}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { routed.Close() })
		c.Broker = routed
	})
	return ts, be
}

// TestRoutedReceiveRefusedDetachesForced: a receive link whose pull is
// refused for now is detached with amqp:link:detach-forced, as Service
// Bus detaches links of an entity that moves. The Go SDK keeps a link
// detached with com.microsoft:server-busy (a passing error, to it) and its
// receiver then returns nothing, without an error, for good.
func TestRoutedReceiveRefusedDetachesForced(t *testing.T) {
	ts, be := newRoutedTestServer(t)
	ts.MustSend(t, "q", coretest.Text("x"))
	be.refuse.Store(true)
	r, err := ts.session(t).NewReceiver(t.Context(), "q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(), Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = r.Receive(ctx, nil)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != amqp.ErrCondDetachForced {
		t.Fatalf("a receive refused while the group moves: %v, want the link detached with %s", err, amqp.ErrCondDetachForced)
	}
}

// TestRoutedCompletionRefusedIsLockLost: the official Go SDK is told a
// completion refused while the entity's group changes leaders failed
// (lock lost), and the message is still there. Answered with server-busy,
// the SDK retries by settling the same go-amqp message again, which
// go-amqp reports as done without asking the broker: the client was told
// the message was completed, and it was delivered again (the partitioned
// cluster soak's "completed then delivered again").
func TestRoutedCompletionRefusedIsLockLost(t *testing.T) {
	ts, be := newRoutedTestServer(t)
	ts.MustSend(t, "q", coretest.Text("x"))
	cs := "Endpoint=sb://" + ts.addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	rcv, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	msgs, err := rcv.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
	be.refuse.Store(true)
	err = rcv.CompleteMessage(ctx, msgs[0], nil)
	var se *azservicebus.Error
	if !errors.As(err, &se) || se.Code != azservicebus.CodeLockLost {
		t.Fatalf("a completion refused while the group moves: %v, want lock lost", err)
	}
	if c := ts.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("counts %+v after a refused completion: the message must still be there", c)
	}
}

// gatedBackend is a refusingBackend whose completions wait at a gate,
// as a completion on another node waits for its group's commit.
type gatedBackend struct {
	*refusingBackend
	entered chan struct{} // a completion reached the broker
	open    chan struct{} // lets it go on
	refused chan struct{} // a receive was refused
}

func (b *gatedBackend) wait() {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.open
}

func (b *gatedBackend) Settle(ctx context.Context, path string, tok core.LockToken, o core.Outcome) error {
	b.wait()
	return b.Backend.Settle(ctx, path, tok, o)
}

func (b *gatedBackend) CompleteMany(path string, toks []core.LockToken, durable bool) []error {
	b.wait()
	return b.Backend.CompleteMany(path, toks, durable)
}

func (b *gatedBackend) Receive(ctx context.Context, path string, opts core.ReceiveOptions) ([]*core.Message, error) {
	msgs, err := b.refusingBackend.Receive(ctx, path, opts)
	if err != nil {
		select {
		case b.refused <- struct{}{}:
		default:
		}
	}
	return msgs, err
}

// TestRoutedDetachAfterSettlementUnderWay: a receive link detached
// because its pull was refused (the entity's group changing leaders)
// while a completion of the link was under way answers that completion
// first. Detached first, the client took the completion for failed, the
// Go SDK settled again through $management and was told the lock was
// lost, yet the completion took effect: a message the client expects
// again never came (TestClusterGroupsSpreadFailover's "never received").
func TestRoutedDetachAfterSettlementUnderWay(t *testing.T) {
	gb := &gatedBackend{refusingBackend: &refusingBackend{}, entered: make(chan struct{}, 1), open: make(chan struct{}), refused: make(chan struct{}, 1)}
	ts := newTestServer(t, func(c *Config) {
		gb.Backend = c.Broker
		routed, err := core.New(core.Config{Router: oneBackend{gb}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { routed.Close() })
		c.Broker = routed
	})
	ts.MustSend(t, "q", coretest.Text("x"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := ts.session(t).NewReceiver(ctx, "q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(), Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	m, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() { accepted <- r.AcceptMessage(ctx, m) }()
	<-gb.entered
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(gb.open) }) }
	defer openGate()
	// The completion waits at the gate; the next pull is refused.
	gb.refuse.Store(true)
	if err := r.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	<-gb.refused
	select {
	case err := <-accepted:
		t.Fatalf("the completion was answered (%v) before it was carried out: the link was detached under it", err)
	case <-time.After(time.Second): // the detach had its time to overtake the completion
	}
	openGate()
	if err := <-accepted; err != nil {
		t.Fatalf("a completion carried out was reported failed: %v", err)
	}
	if c := ts.MustCounts(t, "q"); c.Active != 0 {
		t.Fatalf("counts %+v after the completion", c)
	}
	_, err = r.Receive(ctx, nil)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != amqp.ErrCondDetachForced {
		t.Fatalf("after the completion: %v, want the link detached with %s", err, amqp.ErrCondDetachForced)
	}
}

// TestRoutedSessionCompletionRefusedIsNotReportedDone: a session
// receiver's completion that the broker holding its lock refused (its
// group changing leaders: the store takes no more writes, while the
// session lock has not ended yet) must not reach the Go SDK as done. It
// was answered rejected with message-lock-lost; on a session receiver the
// SDK takes that for recoverable, settles the same go-amqp message again,
// and go-amqp, which took the rejection as settling the delivery, reports
// success without asking anyone: the cluster soak's "completed then
// delivered again" (six messages of a session, all delivered again once
// the session was accepted anew).
func TestRoutedSessionCompletionRefusedIsNotReportedDone(t *testing.T) {
	ts, be := newRoutedTestServer(t)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	c := newSDKClient(t, ts)
	s, err := c.NewSender("sq", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	sendSessions(t, s, "a:1")
	ctx := sdkCtx(t)
	sr, err := c.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	msgs := receiveN(t, sr, 1)
	be.refuse.Store(true)
	// As in TestSDKSessionCompleteAfterLockLost, the deadline lets the
	// SDK's first retry (about 4 s later) run, which is where a false
	// success shows, and ends the wait before its second.
	cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	err = sr.CompleteMessage(cctx, msgs[0], nil)
	cancel()
	if err == nil {
		t.Fatal("a session receiver's completion refused by its group was reported done")
	}
	t.Logf("CompleteMessage refused while the group moves: %v", err)
	be.refuse.Store(false)
	if got := ts.MustCounts(t, "sq"); got.Active != 1 {
		t.Fatalf("counts %+v after a refused completion: the message must still be there", got)
	}
}

// TestRoutedDetachAfterQueuedSettlement: a completion the client sent
// while another completion of the connection was in flight waits in the
// connection for that one's answer, to go to the broker with the next
// batch (completeMany). A detach of its link decided meanwhile (a pull
// refused: the entity's group changing leaders) must still come after
// its answer. It used to overtake it: the detach waited only for the
// completion in flight, the queued one was then applied and its answer
// written after the detach, which the client had taken for the
// completion's failure; the Go SDK settled again through $management, was
// told the lock was lost, and the message was gone (the cluster soak's
// "received, then gone without a completion" after a leadership
// hand-over).
func TestRoutedDetachAfterQueuedSettlement(t *testing.T) {
	gb := &gatedBackend{refusingBackend: &refusingBackend{}, entered: make(chan struct{}, 1), open: make(chan struct{}), refused: make(chan struct{}, 1)}
	ts := newTestServer(t, func(c *Config) {
		gb.Backend = c.Broker
		routed, err := core.New(core.Config{Router: oneBackend{gb}, Clock: backendClock{c.Broker}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { routed.Close() })
		c.Broker = routed
	})
	ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(gb.open) }) }
	defer openGate()

	p := ts.rawDial(t)
	p.open()
	p.writeFrame(0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10})
	p.readFrame()
	second := frames.ReceiverSettleModeSecond
	p.writeFrame(0, &frames.Attach{Name: "rcv", Handle: 0, Role: frames.RoleReceiver, RcvSettleMode: &second,
		Source: &frames.Source{Address: "q"}, Target: &frames.Target{}})
	if a, ok := p.readFrame().(*frames.Attach); !ok || a.Source == nil {
		t.Fatalf("attach answered with %+v", a)
	}
	p.writeFrame(0, creditFlow(0, 0, 2))
	for got := 0; got < 2; {
		if _, ok := p.readFrame().(*frames.Transfer); ok {
			got++
		}
	}
	// The first completion waits at the gate: the connection has one in
	// flight. The second arrives then and waits in the connection, and
	// the credit after it starts a pull, which is refused.
	p.writeFrame(0, &frames.Disposition{Role: frames.RoleReceiver, First: 0, State: &frames.Accepted{}})
	<-gb.entered
	gb.refuse.Store(true)
	p.writeFrames(0,
		&frames.Disposition{Role: frames.RoleReceiver, First: 1, State: &frames.Accepted{}},
		creditFlow(0, 2, 1))
	<-gb.refused
	// The refused pull's answer reaches the connection, which decides the
	// detach, while the first completion still waits.
	time.Sleep(200 * time.Millisecond)
	openGate()

	answered := map[uint32]bool{}
	for {
		switch f := p.readFrame().(type) {
		case *frames.Disposition:
			last := f.First
			if f.Last != nil {
				last = *f.Last
			}
			for id := f.First; id <= last; id++ {
				if _, ok := f.State.(*frames.Accepted); ok {
					answered[id] = true
				}
			}
		case *frames.Detach:
			if !answered[0] || !answered[1] {
				t.Fatalf("the link was detached (%v) before both completions were answered accepted (answered: %v)", f.Error, answered)
			}
			if c := ts.MustCounts(t, "q"); c.Active != 0 {
				t.Fatalf("counts %+v after both completions", c)
			}
			return
		}
	}
}
