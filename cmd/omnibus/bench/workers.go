package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// sendPlan says who sends: one sender link per (connection, link), with
// Inflight goroutines each; for sessions, one goroutine per session so
// that each session's messages go out in order.
type sendPlan struct {
	c        *Config
	tr       transport
	ledger   *Ledger
	stats    *Stats
	pacer    *pacer
	sessions []string // nil: no sessions
}

// run sends until the pacer says stop. claimCtx ends the claiming (the
// --duration); sendCtx bounds the sends themselves.
func (p *sendPlan) run(claimCtx, sendCtx context.Context) error {
	var senders []sender
	defer func() {
		ctx, cancel := closeContext()
		defer cancel()
		for _, s := range senders {
			s.close(ctx)
		}
	}()
	for conn := range p.c.Connections {
		for range p.c.Links {
			s, err := p.tr.sender(sendCtx, conn)
			if err != nil {
				return err
			}
			senders = append(senders, s)
		}
	}
	payload := make([]byte, p.c.Size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	defer p.pacer.begin(claimCtx)()
	var wg sync.WaitGroup
	if p.sessions != nil {
		for j, session := range p.sessions {
			wg.Go(func() { p.loop(claimCtx, sendCtx, senders[j%len(senders)], session, payload) })
		}
	} else {
		for _, s := range senders {
			if ps, ok := s.(pipelinedSender); ok && !p.c.Presettled {
				wg.Go(func() { p.pipeline(claimCtx, sendCtx, ps, payload) })
				continue
			}
			for range p.c.Inflight {
				wg.Go(func() { p.loop(claimCtx, sendCtx, s, "", payload) })
			}
		}
	}
	wg.Wait()
	return nil
}

// pipelinedSender starts a send without waiting for its outcome. A link
// of one is driven by two goroutines, one keeping Inflight sends going and
// one collecting their outcomes in order, instead of a goroutine per send
// in flight, each woken for its own acknowledgement (client CPU -7 % on
// go-amqp). Brokers acknowledge a link's sends in order, so collecting in
// order times each acknowledgement as it comes.
type pipelinedSender interface {
	start(ctx context.Context, m outMsg, payload []byte) (wait func(context.Context) error, err error)
}

// pending is a started send waiting for its outcome.
type pending struct {
	seq  uint64
	t0   time.Time
	wait func(context.Context) error
}

// pipeline sends through s with up to Inflight sends in flight.
func (p *sendPlan) pipeline(claimCtx, sendCtx context.Context, s pipelinedSender, payload []byte) {
	slots := make(chan struct{}, p.c.Inflight)
	started := make(chan pending, p.c.Inflight)
	var collector sync.WaitGroup
	collector.Go(func() {
		var pause errorPause // a failed send holds its slot a while
		for pd := range started {
			err := pd.wait(sendCtx)
			p.finish(sendCtx, pd.seq, pd.t0, err)
			pause.after(claimCtx, err)
			<-slots
		}
	})
	defer collector.Wait()
	defer close(started)
	var pause errorPause // a send that cannot start waits a while
	// free: when this goroutine came back for a slot (zero: its first).
	for free := (time.Time{}); ; free = time.Now() {
		sched, ok := p.pacer.claim(claimCtx)
		if !ok {
			return
		}
		p.noteLag(sched, free)
		select {
		case slots <- struct{}{}:
		case <-sendCtx.Done():
			return
		}
		seq := p.ledger.Next("")
		p.ledger.Sent(seq)
		t0 := time.Now()
		p.stats.stages.handed(seq, sched, t0)
		wait, err := s.start(sendCtx, outMsg{seq: seq, sent: sched}, payload)
		if err != nil {
			<-slots
			if !p.finish(sendCtx, seq, t0, err) || !pause.after(claimCtx, err) {
				return
			}
			continue
		}
		started <- pending{seq: seq, t0: t0, wait: wait}
	}
}

// finish records the outcome of the send of seq, started at t0; false
// when the run is over.
func (p *sendPlan) finish(sendCtx context.Context, seq uint64, t0 time.Time, err error) bool {
	now := time.Now()
	if err != nil {
		p.ledger.SendFailed(seq)
		p.stats.Error(fmt.Errorf("send: %w", err))
		return sendCtx.Err() == nil
	}
	p.ledger.Acked(seq)
	p.stats.stages.acked(seq, now)
	lat := now.Sub(t0)
	if p.c.Presettled {
		lat = -1 // nothing acknowledged it: no latency to report
	}
	p.stats.Send(now, lat)
	return true
}

// noteLag records, when a target rate schedules sends, how late a sender
// that came back for a slot at free (zero: its first) got the slot
// scheduled for sched: the load generator's own delay, a goroutine
// waiting for a CPU. Time the sender spent before free waiting on the
// broker (no slot while sends in flight went unanswered, no link credit,
// a send answered late) is the broker's and is left out.
func (p *sendPlan) noteLag(sched, free time.Time) {
	if p.c.Rate > 0 {
		now := time.Now()
		p.stats.SendLagged(now, now.Sub(later(sched, free)))
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (p *sendPlan) loop(claimCtx, sendCtx context.Context, s sender, session string, payload []byte) {
	var pause errorPause
	// free: when this goroutine came back for a slot (zero: its first).
	for free := (time.Time{}); ; free = time.Now() {
		sched, ok := p.pacer.claim(claimCtx)
		if !ok {
			return
		}
		p.noteLag(sched, free)
		seq := p.ledger.Next(session)
		p.ledger.Sent(seq)
		t0 := time.Now()
		p.stats.stages.handed(seq, sched, t0)
		err := s.send(sendCtx, outMsg{seq: seq, session: session, sent: sched}, payload)
		if !p.finish(sendCtx, seq, t0, err) || !pause.after(claimCtx, err) {
			return
		}
	}
}

// recvPlan says who receives: Links receivers per connection on every
// stream, or one receiver per session.
type recvPlan struct {
	c        *Config
	tr       transport
	ledger   *Ledger
	stats    *Stats
	sessions []string
	gate     *backlogGate // nil: no bound on the backlog
	lastRecv atomic.Int64 // Unix nanoseconds of the latest delivery
}

// open attaches every receiver before any message flows.
func (p *recvPlan) open(ctx context.Context) ([]func(context.Context), func(), error) {
	var loops []func(context.Context)
	var rs []receiver
	closeAll := func() {
		ctx, cancel := closeContext()
		defer cancel()
		for _, r := range rs {
			r.close(ctx)
		}
	}
	add := func(conn, stream int, session string) error {
		r, err := p.tr.receiver(ctx, conn, stream, session)
		if err != nil {
			return err
		}
		rs = append(rs, r)
		loops = append(loops, func(ctx context.Context) { p.loop(ctx, r, stream) })
		return nil
	}
	var err error
	if p.sessions != nil {
		for j, s := range p.sessions {
			if err = add(j%p.c.Connections, 0, s); err != nil {
				break
			}
		}
	} else {
	outer:
		for conn := range p.c.Connections {
			for range p.c.Links {
				for stream := range p.c.streams() {
					if err = add(conn, stream, ""); err != nil {
						break outer
					}
				}
			}
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return loops, closeAll, nil
}

func (p *recvPlan) loop(ctx context.Context, r receiver, stream int) {
	st := p.newSettler(ctx, r, stream)
	defer st.wait()
	for {
		msgs, err := r.receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.stats.Error(fmt.Errorf("receive: %w", err))
			return
		}
		for _, m := range msgs {
			now := time.Now()
			own, nth := p.ledger.Delivered(stream, m.Delivery)
			if nth == 1 {
				p.gate.delivered() // a redelivery frees no room
			}
			if !st.settle(m) {
				return
			}
			p.lastRecv.Store(now.UnixNano())
			switch {
			case own:
				p.stats.Receive(now, now.Sub(m.sent))
				p.stats.stages.arrived(m.Seq, now)
			case p.c.Scenario == ScenarioDrain:
				p.stats.Receive(now, 0) // another run's message: counted, its age is not a latency
			}
		}
	}
}

// settler settles the deliveries of one receive loop. A receiver that
// allows it (an asyncSettler: go-amqp, whose settlement in
// receiver-settle-mode first needs no answer, and the SDK, whose
// CompleteMessage may run concurrently) settles on helper goroutines, so
// the loop is not held up by each settlement; any other settles in the
// loop.
type settler struct {
	p      *recvPlan
	ctx    context.Context
	r      receiver
	stream int
	queue  chan inMsg // nil: settle in the loop
	wg     sync.WaitGroup
}

func (p *recvPlan) newSettler(ctx context.Context, r receiver, stream int) *settler {
	st := &settler{p: p, ctx: ctx, r: r, stream: stream}
	a, ok := r.(asyncSettler)
	if !ok || a.settlers() == 0 {
		return st
	}
	st.queue = make(chan inMsg, 4*p.c.Credit)
	for range a.settlers() {
		st.wg.Go(func() {
			for m := range st.queue {
				st.settleNow(m)
			}
		})
	}
	return st
}

// settle settles m, now or on a helper; false when the run is over.
func (st *settler) settle(m inMsg) bool {
	if st.queue == nil {
		return st.settleNow(m)
	}
	select {
	case st.queue <- m:
		return true
	case <-st.ctx.Done():
		return false
	}
}

// settleNow settles m; a failure releases it in the ledger and counts as
// an error. False when the run is over.
func (st *settler) settleNow(m inMsg) bool {
	if err := st.r.settle(st.ctx, m); err != nil {
		if st.ctx.Err() != nil {
			return false
		}
		st.p.ledger.Released(st.stream, m.Seq)
		st.p.stats.Error(fmt.Errorf("settle: %w", err))
	}
	return true
}

// wait waits for the settlements in progress.
func (st *settler) wait() {
	if st.queue != nil {
		close(st.queue)
		st.wg.Wait()
	}
}
