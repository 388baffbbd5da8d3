package clustersoak

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// Failover is one deposed leader and what followed.
type Failover struct {
	How      string // the fault, and with data groups what the victim led
	Kind     string // the fault: killed, cut off, froze (SIGSTOP)
	Meta     bool   // with data groups: the victim led the meta group
	Old, New int    // node ids
	OldTerm  uint64
	NewTerm  uint64
	// Elected: from the moment the fault took effect to the moment the
	// new leader began serving (its Session, by its own report);
	// FirstAck: to the first send the new leader acknowledged.
	Elected, FirstAck time.Duration

	completions int64 // completions under way at the act
}

// Result is a cluster soak's account.
type Result struct {
	Config      Config
	Dir         string
	LogPaths    []string
	Seed        uint64
	Netns       bool
	NetnsWhyNot string
	Startup     time.Duration // to the first leader serving
	Failovers   []Failover
	Reconnects  int64
	// HungCompletions got no answer within the SDK operation's timeout
	// (20 s) although their connection lived; DeadConnCompletions timed
	// out because the SDK retried them on a link whose connection had
	// died (sdkconnlost.go). Each is also counted unanswered.
	HungCompletions, DeadConnCompletions int64
	// CompletionsAtFailovers bounds the completions a leader may have
	// applied without its answer reaching the receiver.
	CompletionsAtFailovers int64
	Drained                bool
	Elapsed                time.Duration
	Tally                  bench.Tally
	// Order is the partitioned queue's per-key check (with data groups:
	// pkeys.go).
	Order OrderTally
	// SDKReleased counts the session queue's deliveries the SDK gave
	// back without handing them over, and those its releaser may have
	// taken when it stopped on a link failure (sdkrelease.go): they
	// explain as many first deliveries out of order (Tally.OrderExplained).
	SDKReleased int64

	tempDir bool
}

// Ghosts counts deliveries of messages nobody sent.
func (r *Result) Ghosts() int64 { return r.Tally.Foreign + r.Tally.Unknown + r.Tally.NeverSent }

// Vanished counts messages received, then gone without a completion that
// explains it (see package soak: the same rule).
func (r *Result) Vanished() int64 {
	return r.Tally.NeverCompleted + max(0, r.Tally.OnlyUnanswered-r.CompletionsAtFailovers)
}

// Err is nil when every count that must be zero is zero and the drain
// finished; otherwise it names what is wrong.
func (r *Result) Err() error {
	var bad []string
	add := func(n int64, what string) {
		if n != 0 {
			bad = append(bad, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Tally.Lost, "acknowledged but never received")
	add(r.Tally.CompletedAgain, "completed then delivered again")
	add(r.Ghosts(), "received but never sent")
	add(r.Tally.Duplicates, "delivered again with nothing to explain it")
	add(r.Vanished(), "received, then gone without a completion")
	add(r.Order.OutOfOrder, "stored out of order within a partition key or session")
	add(r.Order.SplitKeys, "partition keys stored in more than one partition")
	add(r.Order.Misrouted, "delivered from the queue they were not sent to")
	add(r.Tally.OutOfOrder, "first delivered out of order within a session")
	add(r.Tally.Misrouted, "delivered in another session than sent")
	if b := r.Config.MaxFailover; b > 0 {
		if slow := r.Slow(b); len(slow) > 0 {
			bad = append(bad, fmt.Sprintf("%d failovers over %s (%s)", len(slow), b, strings.Join(slow, "; ")))
		}
	}
	if !r.Drained && len(bad) == 0 {
		bad = append(bad, "the drain did not finish")
	}
	if len(bad) == 0 {
		return nil
	}
	msg := "cluster soak failed: " + strings.Join(bad, ", ")
	if ex := append(slices.Clone(r.Tally.Examples), r.Order.Examples...); len(ex) > 0 {
		msg += " (e.g. " + strings.Join(ex[:min(len(ex), 3)], "; ") + ")"
	}
	return errors.New(msg + "; node logs: " + strings.Join(r.LogPaths, ", "))
}

// Cleanup removes a temporary directory after a passing run, unless the
// config says to keep it.
func (r *Result) Cleanup() error {
	if !r.tempDir || r.Config.Keep || r.Err() != nil {
		return nil
	}
	return os.RemoveAll(r.Dir)
}

// FirstAcks are the failover times of the failovers done as kind
// ("killed", "cut off", "froze (SIGSTOP)"; "" for all), in order.
func (r *Result) FirstAcks(kind string) []time.Duration {
	return r.firstAcksOf(func(f Failover) bool { return kind == "" || f.Kind == kind })
}

func (r *Result) firstAcksOf(keep func(Failover) bool) []time.Duration {
	var out []time.Duration
	for _, f := range r.Failovers {
		if f.FirstAck > 0 && keep(f) {
			out = append(out, f.FirstAck)
		}
	}
	return out
}

// FailoverBound is the longest a failover may take (issue 29: the first
// acknowledged send within 3 s of the fault); the summary counts those
// over it, and a run with Config.MaxFailover set fails on them.
const FailoverBound = 3 * time.Second

// Slow lists the failovers (numbered from 1) whose first acknowledged
// send came later than bound after the fault.
func (r *Result) Slow(bound time.Duration) []string {
	var out []string
	for i, f := range r.Failovers {
		if f.FirstAck > bound {
			out = append(out, fmt.Sprintf("#%d %s after %s", i+1, f.How, ms(f.FirstAck)))
		}
	}
	return out
}

// WriteTable prints the accounting and each failover.
func (r *Result) WriteTable(w io.Writer) error {
	t := r.Tally
	where := "network namespaces"
	if !r.Netns {
		where = "loopback (" + r.NetnsWhyNot + ")"
	}
	held := ""
	if r.Config.HoldReceivers {
		held = ", receivers held until the last failover"
	}
	fmt.Fprintf(w, "cluster soak: %d failovers of a 3-node cluster in %s on %s (seed %d; %d senders × %d in flight, %d peek-lock receivers, %d-byte messages, backlog %d%s)\n\n",
		len(r.Failovers), r.Elapsed.Round(100*time.Millisecond), where, r.Seed, r.Config.Senders, r.Config.Inflight,
		r.Config.Receivers, r.Config.Size, r.Config.Backlog, held)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(n int64, what, rule string) { fmt.Fprintf(tw, "%10d  %s\t%s\n", n, what, rule) }
	row(t.Sent, "sends", "")
	row(t.Acked, "acknowledged", "")
	row(t.SendFailed, "failed or unanswered (a failover; may or may not be stored)", "")
	row(t.UnackedDelivered, "… of those received (they were stored)", "")
	row(t.Unique, "distinct messages received", "")
	row(t.Deliveries, "deliveries", "")
	row(t.Completed, "completions confirmed", "")
	row(t.Unanswered, "completions unanswered, or lock lost at a failover (may or may not be applied)", "")
	row(t.UnansweredAgain, "… of those delivered again", "allowed")
	row(t.OnlyUnanswered, "… of those never seen again (applied in silence)", fmt.Sprintf("≤ %d completions under way at the failovers", r.CompletionsAtFailovers))
	row(t.Redelivered-t.UnansweredAgain, "redeliveries after a lost lock", "allowed")
	row(r.Reconnects, "client reconnections", "")
	row(r.HungCompletions, fmt.Sprintf("completions with no answer at all within %s, their connection alive (counted unanswered)", opTimeout), "")
	row(r.DeadConnCompletions, fmt.Sprintf("completions the SDK retried for %s on a connection reset at a failover (never reached a broker; counted unanswered)", opTimeout), "")
	row(t.Lost, "acknowledged but never received", "must be 0")
	row(t.CompletedAgain, "completed then delivered again", "must be 0")
	row(r.Ghosts(), "received but never sent", "must be 0")
	row(t.Duplicates, "delivered again with nothing to explain it", "must be 0")
	row(r.Vanished(), "received, then gone without a completion", "must be 0")
	if r.Config.Groups > 0 {
		o := r.Order
		row(o.Checked, fmt.Sprintf("partitioned queues: acknowledged messages of %d partition keys and sessions checked for order", o.Keys), "")
		row(o.OutOfOrder, "… stored out of order within their key or session", "must be 0")
		row(o.SplitKeys, "… keys stored in more than one partition", "must be 0")
		row(o.Misrouted, "delivered from the queue they were not sent to", "must be 0")
	}
	if r.Config.Groups > 0 && r.Config.Sessions > 0 {
		row(r.SDKReleased, "session queue: deliveries the SDK released (or may have, at a link failure) unseen", "")
		row(t.OrderExplained, "… first delivered behind later ones of their session after that", fmt.Sprintf("allowed, ≤ %d", r.SDKReleased))
		row(t.OutOfOrder, "session queue: first delivered out of order within a session, unexplained", "must be 0")
		row(t.Misrouted, "… delivered in another session than sent", "must be 0")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !r.Drained {
		fmt.Fprintf(w, "\nthe drain did not finish: no delivery for %s with messages missing\n", r.Config.DrainTimeout)
	}
	if len(r.Failovers) > 0 {
		fmt.Fprintf(w, "\nfirst leader serving after %s\n\n", ms(r.Startup))
		ft := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(ft, "failover\thow\told leader (term)\tnew leader (term)\tnew leader serving\tits first send acked\t")
		for i, f := range r.Failovers {
			fmt.Fprintf(ft, "%d\t%s\t%d (%d)\t%d (%d)\t%s\t%s\t\n", i+1, f.How, f.Old, f.OldTerm, f.New, f.NewTerm, ms(f.Elected), ms(f.FirstAck))
		}
		if err := ft.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nfailover (the fault taking effect → the first send the new leader acknowledged):\n")
		for _, kind := range []string{faultKill, faultCut, faultFreeze} {
			if ds := r.FirstAcks(kind); len(ds) > 0 {
				fmt.Fprintf(w, "  %-16s %s\n", kind+":", spread(ds))
			}
			if r.Config.Groups == 0 {
				continue
			}
			for _, meta := range []bool{true, false} {
				role := "    the meta leader:"
				if !meta {
					role = "    another node:"
				}
				if ds := r.firstAcksOf(func(f Failover) bool { return f.Kind == kind && f.Meta == meta }); len(ds) > 0 {
					fmt.Fprintf(w, "  %-22s %s\n", role, spread(ds))
				}
			}
		}
		slow := r.Slow(FailoverBound)
		fmt.Fprintf(w, "  within %s: %d of %d failovers", FailoverBound, len(r.Failovers)-len(slow), len(r.Failovers))
		if len(slow) > 0 {
			fmt.Fprintf(w, "; over it: %s", strings.Join(slow, "; "))
		}
		fmt.Fprintln(w)
	}
	verdict := "PASS"
	if err := r.Err(); err != nil {
		verdict = err.Error()
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}

// spread is "min–max ms (median M ms)" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%d–%d ms (median %d ms, %d failovers)", s[0].Milliseconds(), s[len(s)-1].Milliseconds(),
		s[len(s)/2].Milliseconds(), len(s))
}
