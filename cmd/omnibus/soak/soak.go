package soak

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// quiet is how long the final drain waits, once every acknowledged
// message was delivered, for deliveries that still come (redeliveries of
// completions a kill left unanswered).
const quiet = time.Second

// Run performs the soak c describes, printing a line per kill to
// progress (nil: none). It returns an error only when the soak could not
// be carried out (bad config, a broker that did not start); a soak that
// found loss, redelivered completions or ghosts returns a Result whose
// Err says so.
func Run(ctx context.Context, c Config, progress io.Writer) (*Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	res := &Result{Config: c, Dir: c.Dir}
	if res.Dir == "" {
		dir, err := os.MkdirTemp("", "omnibus-soak-")
		if err != nil {
			return nil, err
		}
		res.Dir, res.tempDir = dir, true
	}
	b, err := newBroker(c.Binary, c.BrokerArgs, res.Dir, bench.NewRunID()+bench.NewRunID(), c.Subscriptions, c.DiskFaults > 0)
	if err != nil {
		return nil, err
	}
	res.LogPath = b.logPath
	defer b.stop()
	if res.Seed = c.Seed; res.Seed == 0 {
		var s [8]byte
		_, _ = rand.Read(s[:])
		res.Seed = binary.LittleEndian.Uint64(s[:])
	}
	rng := mrand.New(mrand.NewPCG(res.Seed, res.Seed>>1))
	uptime := func() time.Duration {
		return c.MinUptime + time.Duration(rng.Int64N(int64(c.MaxUptime-c.MinUptime)+1))
	}

	started := time.Now()
	life := &lifeClock{}
	life.begin(started)
	if err := b.start(); err != nil {
		return nil, err
	}
	if res.Startup, err = b.waitReady(ctx, started, c.ReadyTimeout); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "soak: broker ready in %s on %s (data %s, seed %d)\n", ms(res.Startup), b.addr, res.Dir, res.Seed)

	ledger := bench.NewLedger(bench.NewRunID(), max(c.Subscriptions, 1))
	ld := newLoad(&c, b, ledger, life)
	claim, stopClaim := context.WithCancel(ctx)
	defer stopClaim()
	sendCtx, stopSends := context.WithCancel(context.Background())
	defer stopSends()
	recvCtx, stopRecv := context.WithCancel(context.Background())
	defer stopRecv()
	var senders, receivers sync.WaitGroup
	senders.Go(func() { ld.send(claim, sendCtx) })
	receivers.Go(func() { ld.receive(recvCtx) })
	defer ld.close()

	var runErr error
	events, faults := c.Kills+c.DiskFaults, c.DiskFaults
	for k := 1; k <= events && runErr == nil; k++ {
		// Every kill is under load: the random time counts from the
		// first send this life acknowledged.
		if runErr = waitLoaded(ctx, life.current(), c.ReadyTimeout); runErr != nil {
			break
		}
		up := uptime()
		if !bench.Sleep(ctx, up) {
			runErr = ctx.Err()
			break
		}
		firstAck, acked := life.end()
		if n := len(res.Restarts); n > 0 {
			res.Restarts[n-1].FirstAck = firstAck
		}
		// A disk fault or a kill, in an order drawn from the seed.
		r := Restart{Uptime: up, Acked: acked}
		var atKill int64
		if rng.IntN(events-k+1) < faults {
			faults--
			var df DiskFault
			df, atKill, err = ld.diskFault(b, c.ReadyTimeout)
			r.DiskFault = &df
		} else {
			atKill, err = ld.completionsAtKill(b.kill)
		}
		res.CompletionsAtKills += atKill
		if err != nil {
			runErr = err
			break
		}
		t0 := time.Now()
		life.begin(t0)
		if err := b.start(); err != nil {
			runErr = err
			break
		}
		probed, err := b.waitReady(ctx, t0, c.ReadyTimeout)
		if err != nil {
			runErr = fmt.Errorf("restart %d: %w", k, err)
			break
		}
		r.Recovery = life.current().ready(probed)
		res.Restarts = append(res.Restarts, r)
		what := "kill"
		if df := r.DiskFault; df != nil {
			what = fmt.Sprintf("disk fault (%d sends in flight: %d stored, %d outcome unknown, %d refused, %d other, %d never answered; "+
				"SIGTERM → exit status %d in %s)", df.InFlight, df.Stored, df.Unknown, df.Refused, df.Other, df.Unanswered, df.ExitStatus, ms(df.Stop))
		}
		fmt.Fprintf(progress, "soak: %s, %d/%d, after %s up (%d sends acknowledged in that life); ready again in %s\n",
			what, k, events, ms(up), acked, ms(r.Recovery))
	}
	if runErr == nil { // the last life is under load too
		if runErr = waitLoaded(ctx, life.current(), c.ReadyTimeout); runErr == nil && !bench.Sleep(ctx, uptime()) {
			runErr = ctx.Err()
		}
	}
	firstAck, acked := life.end()
	if n := len(res.Restarts); n > 0 {
		res.Restarts[n-1].FirstAck = firstAck
	}
	res.LastLifeAcked = acked

	// Stop sending, let the sends in flight be answered, then drain.
	stopClaim()
	senders.Wait()
	res.Drained = runErr == nil && drain(ctx, ledger, ld, c.DrainTimeout)
	stopRecv()
	receivers.Wait()
	ld.close()
	res.Reconnects = ld.reconnects()
	res.Elapsed = time.Since(started)
	// Loss is judged whether the drain finished or timed out (no delivery
	// for DrainTimeout: what is missing then is lost), not when the soak
	// was cut short.
	res.Tally = ledger.Tally(runErr == nil)
	if runErr != nil {
		return res, runErr
	}
	return res, nil
}

// drain waits until every acknowledged message was delivered, every
// completion answered and nothing more arrived for a second (true), or
// until no delivery came for timeout (false).
func drain(ctx context.Context, l *bench.Ledger, ld *load, timeout time.Duration) bool {
	ld.lastRecv.Store(time.Now().UnixNano())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		idle := time.Since(time.Unix(0, ld.lastRecv.Load()))
		if l.Pending() <= 0 && ld.inFlight.Load() == 0 && idle >= quiet {
			return true
		}
		if idle > timeout {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// waitLoaded waits until life l has acknowledged a send. A broker that
// accepts connections but acknowledges nothing for timeout fails the
// soak: it is not serving.
func waitLoaded(ctx context.Context, l *life, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for l.acks.Load() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the broker acknowledged no send within %s of starting", timeout)
		}
		if !bench.Sleep(ctx, time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// lifeClock follows the broker's current life (from one start to the
// next kill): when it began, and the sends acknowledged in it.
type lifeClock struct {
	cur atomic.Pointer[life]
}

type life struct {
	start     time.Time
	firstConn atomic.Int64 // nanoseconds from start to the first client connection; 0: none yet
	firstAck  atomic.Int64 // nanoseconds from start to the first acknowledgement; 0: none yet
	acks      atomic.Int64
}

// connected records a client connection made (dialled) in life l.
func (l *life) connected() { l.firstConn.CompareAndSwap(0, int64(time.Since(l.start))) }

// ready is when life l's broker first accepted a connection: the prober's
// (probed, after start) or a client's, whichever came first.
func (l *life) ready(probed time.Duration) time.Duration {
	if c := time.Duration(l.firstConn.Load()); c > 0 && c < probed {
		return c
	}
	return probed
}

func (c *lifeClock) begin(t time.Time) { c.cur.Store(&life{start: t}) }

// current is the broker's current life.
func (c *lifeClock) current() *life { return c.cur.Load() }

// acked records an acknowledged send that started in life l. A sender
// takes l before it sends: an acknowledgement read just after a kill
// belongs to the life that sent it, not to the next one.
func (l *life) acked() {
	if l.acks.Add(1) == 1 {
		l.firstAck.CompareAndSwap(0, int64(time.Since(l.start)))
	}
}

// end returns the current life's time to its first acknowledgement and
// its count of acknowledgements.
func (c *lifeClock) end() (firstAck time.Duration, acks int64) {
	l := c.cur.Load()
	return time.Duration(l.firstAck.Load()), l.acks.Load()
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
