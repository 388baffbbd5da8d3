package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omnibusmq/omnibus/conformance/txnwire"
)

// The pipeline scenario: the exactly-once step of a message handler,
// one message at a time per connection, as the .NET SDK performs it —
// receive (peek-lock) from --queue, then complete it and send a result
// to --to; with --txn both in one transaction (declare, complete, send
// through --queue to --to, discharge), without it as two operations.
// go-amqp has no transactions, so this scenario speaks AMQP with
// conformance/txnwire. Each result carries its input's body, so the
// final drain of --to checks that every committed step left exactly one
// result.

// runPipeline runs the pipeline scenario.
func runPipeline(ctx context.Context, c Config, progress io.Writer) (*Result, error) {
	runID := newRunID()
	dial, err := pipelineDialer(&c)
	if err != nil {
		return nil, err
	}
	n := c.Prefill
	if err := pipelinePrefill(ctx, dial, &c, runID, n); err != nil {
		return nil, fmt.Errorf("pre-fill: %w", err)
	}

	cpu0 := sampleCPU(c.BrokerPID)
	start := time.Now()
	stats := NewStats(start, c.Warmup)
	ledger := NewLedger(runID, 1) // only for the progress line's counts
	stopProgress := startProgress(stats, progress, &c, ledger)
	runCtx, stop := context.WithCancel(ctx)
	if c.Count == 0 {
		runCtx, stop = context.WithTimeout(ctx, c.Duration)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	for range c.Connections {
		wg.Go(func() {
			if err := pipelineWorker(runCtx, dial, &c, runID, stats, &done, n, stop); err != nil && runCtx.Err() == nil {
				stats.Error(err)
				stop()
			}
		})
	}
	wg.Wait()
	stop()
	cpu1 := sampleCPU(c.BrokerPID)
	stopProgress()

	r := stats.result(&c, runID)
	committed := done.Load()
	got, err := pipelineDrain(ctx, dial, &c, runID, committed)
	if err != nil {
		return nil, fmt.Errorf("draining %s: %w", c.PipelineTo, err)
	}
	r.Tally = Tally{Allocated: n, Sent: committed, Acked: committed, Deliveries: got.deliveries,
		Unique: got.unique, Duplicates: got.deliveries - got.unique, Lost: max(committed-got.unique, 0), LossChecked: true}
	// A step is a delivery and a send, as the other scenarios count.
	r.Operations = 2 * committed
	r.ClientCPU = (cpu1.client - cpu0.client).Seconds()
	if cpu0.brokerOK && cpu1.brokerOK {
		r.BrokerCPU = (cpu1.broker - cpu0.broker).Seconds()
	}
	r.MachineBusyPct, r.MachineStealPct = machineUse(cpu0, cpu1)
	return r, nil
}

// pipelineDialer returns a function connecting a txnwire client to --url.
func pipelineDialer(c *Config) (func(context.Context) (*txnwire.Conn, error), error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") {
		return nil, fmt.Errorf("%w: the pipeline scenario needs an amqp:// or amqps:// --url", errUsage)
	}
	o := txnwire.Options{Addr: u.Host, Host: u.Hostname(), User: c.User, Password: c.Password}
	if u.Port() == "" {
		o.Addr = net.JoinHostPort(u.Hostname(), map[string]string{"amqp": "5672", "amqps": "5671"}[u.Scheme])
	}
	if u.Scheme == "amqps" {
		roots, err := trustedRoots(c.CAFile)
		if err != nil {
			return nil, err
		}
		o.TLS = &tls.Config{RootCAs: roots, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	}
	return func(ctx context.Context) (*txnwire.Conn, error) { return txnwire.Dial(ctx, o) }, nil
}

// pipelinePayload is input i's body: the run id, i, and padding up to
// --size.
func pipelinePayload(c *Config, runID string, i int64) []byte {
	b := fmt.Appendf(nil, "%s-%d", runID, i)
	if len(b) < c.Size {
		b = append(b, strings.Repeat(".", c.Size-len(b))...)
	}
	return b
}

// pipelinePrefill puts n inputs into --queue, 100 in flight.
func pipelinePrefill(ctx context.Context, dial func(context.Context) (*txnwire.Conn, error), c *Config, runID string, n int64) error {
	conn, err := dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	s, err := conn.Begin()
	if err != nil {
		return err
	}
	snd, err := s.AttachSender(c.Queue, "")
	if err != nil {
		return err
	}
	for i := int64(0); i < n; i += 100 {
		var ids []uint32
		for j := i; j < min(i+100, n); j++ {
			id, err := snd.Transfer(nil, pipelinePayload(c, runID, j))
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			if st, err := s.Outcome(id); err != nil || !st.Accepted {
				return errors.Join(err, fmt.Errorf("send answered %s", st))
			}
		}
	}
	return nil
}

// pipelineWorker performs steps on one connection until n steps on this
// run's inputs are done over all workers, or ctx ends.
func pipelineWorker(ctx context.Context, dial func(context.Context) (*txnwire.Conn, error), c *Config, runID string, stats *Stats,
	done *atomic.Int64, n int64, finished func()) error {
	conn, err := dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rs, err := conn.Begin()
	if err != nil {
		return err
	}
	credit := uint32(c.Credit)
	rcv, err := rs.AttachReceiver(c.Queue, credit)
	if err != nil {
		return err
	}
	ss, err := conn.Begin()
	if err != nil {
		return err
	}
	var snd, ctl *txnwire.Link
	if c.Txn {
		// Through the input's entity, as a transaction must go.
		snd, err = ss.AttachSender(c.Queue, c.PipelineTo)
	} else {
		snd, err = ss.AttachSender(c.PipelineTo, "")
	}
	if err != nil {
		return err
	}
	if c.Txn {
		cs, err := conn.Begin()
		if err != nil {
			return err
		}
		if ctl, err = cs.AttachController(); err != nil {
			return err
		}
	}
	left := credit
	for ctx.Err() == nil {
		d, err := rcv.Receive()
		if err != nil {
			return err
		}
		t0 := time.Now()
		stats.Receive(t0, 0)
		if left--; left <= credit/2 {
			if err := rcv.Credit(credit); err != nil {
				return err
			}
			left = credit
		}
		if err := pipelineStep(rs, snd, ctl, d); err != nil {
			return err
		}
		now := time.Now()
		stats.Send(now, now.Sub(t0))
		if !strings.HasPrefix(string(d.Body), runID+"-") {
			continue // another run's input, passed on all the same
		}
		if done.Add(1) >= n {
			finished()
		}
	}
	return nil
}

// pipelineStep completes d and sends its result, in one transaction when
// ctl is not nil.
func pipelineStep(rs *txnwire.Session, snd, ctl *txnwire.Link, d txnwire.Delivery) error {
	var txn []byte
	if ctl != nil {
		var err error
		if txn, err = ctl.Declare(); err != nil {
			return err
		}
	}
	if st, err := rs.Complete(d.ID, txn); err != nil || !st.Accepted {
		return errors.Join(err, fmt.Errorf("complete answered %s", st))
	}
	if st, err := snd.Send(txn, d.Body); err != nil || !st.Accepted {
		return errors.Join(err, fmt.Errorf("send answered %s", st))
	}
	if ctl != nil {
		if st, err := ctl.Discharge(txn, false); err != nil || !st.Accepted {
			return errors.Join(err, fmt.Errorf("commit answered %s", st))
		}
	}
	return nil
}

// drained is what the final drain of --to found of this run.
type drained struct{ deliveries, unique int64 }

// pipelineDrain receives this run's results from --to until want
// distinct ones arrived or none came for --drain-timeout.
func pipelineDrain(ctx context.Context, dial func(context.Context) (*txnwire.Conn, error), c *Config, runID string, want int64) (drained, error) {
	var got drained
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := dial(ctx)
	if err != nil {
		return got, err
	}
	defer conn.Close()
	s, err := conn.Begin()
	if err != nil {
		return got, err
	}
	rcv, err := s.AttachReceiver(c.PipelineTo, 500)
	if err != nil {
		return got, err
	}
	seen := map[string]bool{}
	left := 500
	for got.unique < want {
		_ = conn.SetDeadline(time.Now().Add(c.DrainTimeout))
		d, err := rcv.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got, nil // quiet: what is missing is lost
			}
			return got, err
		}
		if st, err := s.Complete(d.ID, nil); err != nil || !st.Accepted {
			return got, errors.Join(err, fmt.Errorf("complete answered %s", st))
		}
		if left--; left <= 250 {
			if err := rcv.Credit(500); err != nil {
				return got, err
			}
			left = 500
		}
		key, _, _ := strings.Cut(string(d.Body), ".")
		if !strings.HasPrefix(key, runID+"-") {
			continue // another run's
		}
		got.deliveries++
		if !seen[key] {
			seen[key] = true
			got.unique++
		}
	}
	return got, nil
}
