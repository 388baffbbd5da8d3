package clustersoak

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// nodeCount is the cluster's size.
const nodeCount = 3

// quiet is how long the final drain waits, once every acknowledged
// message was delivered, for deliveries that still come.
const quiet = time.Second

// Run performs the soak c describes, printing a line per failover to
// progress (nil: none). It returns an error only when the soak could not
// be carried out; a soak that found a violation returns a Result whose
// Err says so.
func Run(ctx context.Context, c Config, progress io.Writer) (*Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	res := &Result{Config: c, Dir: c.Dir}
	if res.Dir != "" {
		if err := os.MkdirAll(res.Dir, 0o755); err != nil {
			return nil, err
		}
	} else {
		dir, err := os.MkdirTemp("", "omnibus-cluster-soak-")
		if err != nil {
			return nil, err
		}
		res.Dir, res.tempDir = dir, true
	}
	if res.Seed = c.Seed; res.Seed == 0 {
		var s [8]byte
		_, _ = rand.Read(s[:])
		res.Seed = binary.LittleEndian.Uint64(s[:])
	}
	rng := mrand.New(mrand.NewPCG(res.Seed, res.Seed>>1))

	nw, err := newNetwork(c.Netns, nodeCount)
	if err != nil {
		return nil, err
	}
	defer nw.teardown()
	res.Netns, res.NetnsWhyNot = nw.netns, nw.why
	key := bench.NewRunID() + bench.NewRunID()
	nodes, err := newNodes(&c, nw, res.Dir, key, nodeCount)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, n := range nodes {
			if n.frozen {
				_ = n.freeze(false)
			}
			_ = n.kill()
			n.log.Close()
		}
	}()
	for _, n := range nodes {
		res.LogPaths = append(res.LogPaths, n.logPath)
	}
	if err := startAll(nodes, key, c.ReadyTimeout); err != nil {
		return nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.amqp
	}
	lb, err := newBalancer(addrs)
	if err != nil {
		return nil, err
	}
	defer lb.close()
	started := time.Now()
	leader, _, err := waitServing(ctx, nodes, c.ReadyTimeout)
	if err != nil {
		return nil, fmt.Errorf("the cluster did not elect a leader: %w", err)
	}
	if c.Groups > 0 {
		if _, err := waitAllServed(ctx, nodes, c.Groups, c.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("the cluster's groups: %w", err)
		}
		if err := createPartitioned(ctx, nodes[0], key, c.Sessions > 0, c.ReadyTimeout); err != nil {
			return nil, err
		}
	}
	res.Startup = time.Since(started)
	where := "loopback: kills and freezes, no cut-offs (" + nw.why + ")"
	if nw.netns {
		where = "network namespaces on " + nw.subnet + ".0/24"
	}
	fmt.Fprintf(progress, "cluster soak: node %d leads after %s (%s; seed %d; data %s)\n",
		leader.id, ms(res.Startup), where, res.Seed, res.Dir)

	ld := &load{c: &c, ledger: bench.NewLedger(bench.NewRunID(), 1), order: newOrderBook(),
		conn: "Endpoint=sb://localhost:" + portOf(lb.addr()) + ";SharedAccessKeyName=" + keyName +
			";SharedAccessKey=" + key + ";UseDevelopmentEmulator=true;"}
	if ld.trace, err = newTrace(filepath.Join(res.Dir, "deliveries.log")); err != nil {
		return nil, err
	}
	defer ld.trace.close()
	var stopSDK func()
	ld.releases, ld.connLost, stopSDK = listenSDK(ld.trace)
	defer stopSDK()
	claim, stopClaim := context.WithCancel(ctx)
	defer stopClaim()
	recvCtx, stopRecv := context.WithCancel(context.Background())
	defer stopRecv()
	var senders, receivers sync.WaitGroup
	if c.Backlog > 0 {
		if err := fillBacklog(ctx, ld, c.Backlog); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "cluster soak: %d messages queued before the receivers start\n", c.Backlog)
	}
	senders.Go(func() { ld.send(claim, c.Senders) })
	startReceivers := func() { receivers.Go(func() { ld.receive(recvCtx, c.Receivers) }) }
	if !c.HoldReceivers {
		startReceivers()
	}

	var runErr error
	for k := 1; k <= c.Failovers && runErr == nil; k++ {
		if runErr = waitAcks(ctx, ld, 1, c.ReadyTimeout); runErr != nil {
			break
		}
		pause(ctx, c.MinUptime+time.Duration(rng.Int64N(int64(c.MaxUptime-c.MinUptime)+1)))
		if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		var f Failover
		if c.Groups > 0 {
			f, runErr = groupsFailover(ctx, &c, k, nodes, nw, lb, ld)
		} else {
			f, runErr = failover(ctx, &c, k, nodes, nw, lb, ld)
		}
		res.Failovers = append(res.Failovers, f)
		res.CompletionsAtFailovers += f.completions
		if runErr == nil && c.Groups > 0 {
			fmt.Fprintf(progress, "cluster soak: failover %d/%d: node %d %s; its groups served again %s after the fault took effect; a send acknowledged after %s\n",
				k, c.Failovers, f.Old, f.How, ms(f.Elected), ms(f.FirstAck))
		} else if runErr == nil {
			fmt.Fprintf(progress, "cluster soak: failover %d/%d: %s node %d (term %d) → node %d leads (term %d), serving %s after the fault took effect; its first send acknowledged after %s\n",
				k, c.Failovers, f.How, f.Old, f.OldTerm, f.New, f.NewTerm, ms(f.Elected), ms(f.FirstAck))
		}
	}
	if c.HoldReceivers {
		startReceivers()
	}
	if runErr == nil { // the last leader is under load too
		runErr = waitAcks(ctx, ld, ld.acks.Load()+1, c.ReadyTimeout)
	}
	stopClaim()
	senders.Wait()
	res.Drained = runErr == nil && drain(ctx, ld, c.DrainTimeout)
	if !res.Drained {
		ld.traceLeft(ctx)
	}
	stopRecv()
	receivers.Wait()
	res.Reconnects = ld.reconnects.Load()
	res.HungCompletions = ld.hung.Load()
	res.DeadConnCompletions = ld.hungDeadConn.Load()
	res.Elapsed = time.Since(started)
	res.Tally = ld.ledger.Tally(runErr == nil)
	res.SDKReleased = ld.sdkReleased.Load()
	res.Order = ld.order.tally()
	return res, runErr
}

// failover deposes the serving node (killed, cut off or frozen in turn
// in mixed mode: faults.go), waits for another to serve and for the first
// send it acknowledged (failtime.go), then brings the old one back.
func failover(ctx context.Context, c *Config, k int, nodes []*node, nw *network, lb *balancer, ld *load) (Failover, error) {
	// A loaded machine may be between two leaders just now: wait for one.
	if _, _, err := waitServing(ctx, nodes, c.ReadyTimeout); err != nil {
		return Failover{}, fmt.Errorf("failover %d: no serving leader to depose within %s", k, c.ReadyTimeout)
	}
	old, st, err := serving(nodes)
	if err != nil {
		return Failover{}, fmt.Errorf("failover %d: no serving leader to depose", k)
	}
	kind, _ := schedule(faultKinds(c.Mode, nw.netns), k)
	f := Failover{Old: old.id, OldTerm: st.Term, How: kind, Kind: kind}
	defer ld.faultBegins()()
	f.completions, err = ld.completionsAt(func() error {
		lb.setUp(old.id-1, false)
		return fault(kind, old, nw)
	})
	effect := time.Now() // the process is reaped, the link down, or the process stopped
	ld.acked.start()
	defer ld.acked.stop()
	if err != nil {
		return f, fmt.Errorf("failover %d: %w", k, err)
	}
	next, st, err := waitServing(ctx, nodes, c.ReadyTimeout)
	if err != nil {
		return f, fmt.Errorf("failover %d: no new leader within %s", k, c.ReadyTimeout)
	}
	f.New, f.NewTerm = next.id, st.Term
	if st.ServingSince.IsZero() {
		return f, fmt.Errorf("failover %d: node %d serves but does not say since when (an older omnibus?)", k, next.id)
	}
	f.Elected = st.ServingSince.Sub(effect)
	deadline := time.Now().Add(c.ReadyTimeout)
	for {
		d, ok := ld.acked.firstAck(effect, st.ServingSince)
		if ok {
			f.FirstAck = d
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f, fmt.Errorf("failover %d: node %d leads but acknowledged no send within %s", k, next.id, c.ReadyTimeout)
		}
		pause(ctx, 2*time.Millisecond)
	}
	// Bring the old leader back: restarted, healed, or woken up.
	err = recoverFrom(kind, old, nw)
	if err != nil {
		return f, fmt.Errorf("failover %d: bringing node %d back: %w", k, old.id, err)
	}
	lb.setUp(old.id-1, true)
	return f, nil
}

// waitServing waits until some node serves, and returns it with its
// status.
func waitServing(ctx context.Context, nodes []*node, timeout time.Duration) (*node, raftstore.Status, error) {
	deadline := time.Now().Add(timeout)
	for {
		n, st, err := serving(nodes)
		if err == nil {
			return n, st, nil
		}
		if time.Now().After(deadline) {
			return nil, st, err
		}
		if ctx.Err() != nil {
			return nil, st, ctx.Err()
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// waitAcks waits until at least n sends were acknowledged in all.
func waitAcks(ctx context.Context, ld *load, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for ld.acks.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("no send acknowledged within %s", timeout)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pause(ctx, 5*time.Millisecond)
	}
	return nil
}

// fillBacklog sends n messages before anything receives.
func fillBacklog(ctx context.Context, ld *load, n int) error {
	claim, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ld.send(claim, ld.c.Senders)
	}()
	err := waitAcks(ctx, ld, int64(n), 10*time.Minute)
	stop()
	<-done
	return err
}

// drain waits until every acknowledged message was delivered, every
// completion answered and nothing more arrived for a second (true), or
// until no delivery came for timeout (false).
func drain(ctx context.Context, ld *load, timeout time.Duration) bool {
	ld.lastRecv.Store(time.Now().UnixNano())
	for {
		idle := time.Since(time.Unix(0, ld.lastRecv.Load()))
		if ld.ledger.Pending() <= 0 && ld.inFlight.Load() == 0 && idle >= quiet {
			return true
		}
		if idle > timeout || ctx.Err() != nil {
			return false
		}
		pause(ctx, 10*time.Millisecond)
	}
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
