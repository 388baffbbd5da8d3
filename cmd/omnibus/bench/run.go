package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"time"
)

// Run performs one benchmark run as c describes, printing a progress line
// every second to progress (nil or c.Quiet: none). It returns an error
// only when the run could not be carried out (no connection, bad
// config); a run that found errors, loss or duplicates returns a
// [Result] whose Err says so.
func Run(ctx context.Context, c Config, progress io.Writer) (*Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.Scenario == ScenarioPipeline {
		return runPipeline(ctx, c, progress)
	}
	runID := newRunID()
	tr, err := openTransport(ctx, &c, runID)
	if err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := closeContext()
		defer cancel()
		tr.close(ctx)
	}()

	ledger := NewLedger(runID, c.streams())
	var sessions []string
	if c.Scenario == ScenarioSessions {
		for j := range c.Sessions {
			sessions = append(sessions, fmt.Sprintf("%s-s%d", runID, j))
		}
	}
	if c.Scenario == ScenarioReceive {
		// Pre-fill, untimed, into a throw-away Stats.
		pre := &sendPlan{c: &c, tr: tr, ledger: ledger, stats: NewStats(time.Now(), 0),
			pacer: newPacer(c.Prefill, 0, time.Now())}
		if err := pre.run(ctx, ctx); err != nil {
			return nil, err
		}
		if t := ledger.Tally(false); t.Acked != c.Prefill {
			return nil, fmt.Errorf("pre-fill: only %d of %d messages acknowledged", t.Acked, c.Prefill)
		}
	}

	gate := newBacklogGate(c.MaxBacklog)
	rp := &recvPlan{c: &c, tr: tr, ledger: ledger, sessions: sessions, gate: gate}
	var recvLoops []func(context.Context)
	if c.receives() {
		loops, closeAll, err := rp.open(ctx)
		if err != nil {
			return nil, err
		}
		defer closeAll()
		recvLoops = loops
	}

	before := ledger.Tally(false) // a pre-fill's sends are not the timed part's
	cpu0 := sampleCPU(c.BrokerPID)
	start := time.Now()
	stats := NewStats(start, c.Warmup)
	if c.Rate > 0 && c.sends() && c.receives() {
		stats.followStages()
	}
	rp.stats = stats
	rp.lastRecv.Store(start.UnixNano())
	stopProgress := startProgress(stats, progress, &c, ledger)

	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var rwg sync.WaitGroup
	for _, loop := range recvLoops {
		rwg.Go(func() { loop(recvCtx) })
	}
	var sendErr error
	if c.sends() {
		claimCtx, cancel := context.WithCancel(ctx)
		if c.Count == 0 {
			claimCtx, cancel = context.WithTimeout(ctx, c.Duration)
		}
		sp := &sendPlan{c: &c, tr: tr, ledger: ledger, stats: stats, sessions: sessions,
			pacer: newPacer(c.Count, c.Rate, start).bounded(gate)}
		sendErr = sp.run(claimCtx, ctx)
		cancel()
	}
	switch {
	case c.Scenario == ScenarioDrain:
		waitQuiet(ctx, rp, c.DrainTimeout)
	case c.receives() && sendErr == nil:
		waitDrained(ctx, ledger, rp, c.DrainTimeout)
	}
	stopRecv()
	rwg.Wait()
	cpu1 := sampleCPU(c.BrokerPID)
	stopProgress()
	if sendErr != nil {
		return nil, sendErr
	}

	r := stats.result(&c, runID)
	// Loss is judged when receivers emptied the queue, or when they went
	// quiet for the drain timeout with messages still missing.
	r.Tally = ledger.Tally(c.receives() && ctx.Err() == nil)
	r.Operations = r.Tally.operations() - before.operations()
	r.ClientCPU = (cpu1.client - cpu0.client).Seconds()
	if cpu0.brokerOK && cpu1.brokerOK {
		r.BrokerCPU = (cpu1.broker - cpu0.broker).Seconds()
	}
	r.MachineBusyPct, r.MachineStealPct = machineUse(cpu0, cpu1)
	if c.StagesPath != "" && stats.stages != nil {
		if err := stats.stages.writeCSV(c.StagesPath, stats.measureFrom); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// waitDrained waits until every acknowledged message was delivered
// (true), or no delivery came for timeout or ctx ended (false).
func waitDrained(ctx context.Context, l *Ledger, rp *recvPlan, timeout time.Duration) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if l.Pending() <= 0 {
			return true
		}
		if time.Since(time.Unix(0, rp.lastRecv.Load())) > timeout {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// waitQuiet waits until no delivery came for quiet, or ctx ended.
func waitQuiet(ctx context.Context, rp *recvPlan, quiet time.Duration) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Since(time.Unix(0, rp.lastRecv.Load())) <= quiet {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func openTransport(ctx context.Context, c *Config, runID string) (transport, error) {
	switch {
	case c.Scenario == ScenarioREST:
		return newRESTTransport(c, runID), nil
	case c.SDK:
		return newSDKTransport(c, runID)
	default:
		return newAMQPTransport(ctx, c, runID)
	}
}

// NewRunID returns a fresh random run id (12 hex digits).
func NewRunID() string { return newRunID() }

func newRunID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startProgress prints a line every second until the returned func is
// called (which waits for the printer to stop).
func startProgress(s *Stats, w io.Writer, c *Config, l *Ledger) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				p := s.Tick(now)
				if w == nil || c.Quiet {
					continue
				}
				fmt.Fprintf(w, "%s %4.0fs  sent %7d/s  recv %7d/s  p50 %7.2fms  p99 %7.2fms  errors %d  pending %d\n",
					c.Label, p.T, p.Sent, p.Received, p.P50ms, p.P99ms, p.Errors, l.Pending())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// closeContext bounds closing links and connections: a peer that never
// answers a detach must not hang the run.
func closeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Second)
}
