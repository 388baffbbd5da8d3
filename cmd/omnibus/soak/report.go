package soak

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

// Restart is one kill and the start after it.
type Restart struct {
	Uptime   time.Duration // how long the broker ran under load (from its first acknowledged send) before the kill
	Acked    int64         // sends acknowledged in that life
	Recovery time.Duration // from starting the process to the first AMQP connection it accepted
	FirstAck time.Duration // from starting the process to the first send acknowledged after it (0: none)
}

// Result is a soak's account.
type Result struct {
	Config        Config
	Dir           string // the broker's data directory, Config.json and log live here
	LogPath       string
	Seed          uint64
	Startup       time.Duration // the first start, on an empty data directory, to ready
	Restarts      []Restart
	LastLifeAcked int64 // sends acknowledged after the last restart
	Reconnects    int   // client connections made again after a failure
	// CompletionsAtKills bounds the completions the broker may have
	// applied without its answer reaching the receiver: those under way
	// at each kill.
	CompletionsAtKills int64
	Drained            bool // every acknowledged message arrived and the queue went quiet
	Elapsed            time.Duration
	Tally              bench.Tally

	tempDir bool
}

// Ghosts counts deliveries of messages nobody sent: of another run (the
// data directory was empty at the start, so none can be there), of a
// sequence number never allocated, or of one never handed to a sender.
func (r *Result) Ghosts() int64 { return r.Tally.Foreign + r.Tally.Unknown + r.Tally.NeverSent }

// Vanished counts messages received but then gone without a completion
// that explains it: never completed at all, or more messages whose only
// completions went unanswered than completions were under way at the
// kills (each such message needs one the broker applied in silence).
func (r *Result) Vanished() int64 {
	return r.Tally.NeverCompleted + max(0, r.Tally.OnlyUnanswered-r.CompletionsAtKills)
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
	if !r.Drained && len(bad) == 0 {
		bad = append(bad, "the drain did not finish")
	}
	if len(bad) == 0 {
		return nil
	}
	msg := "soak failed: " + strings.Join(bad, ", ")
	if ex := r.Tally.Examples; len(ex) > 0 {
		msg += " (e.g. " + strings.Join(ex[:min(len(ex), 3)], "; ") + ")"
	}
	return errors.New(msg + "; broker log: " + r.LogPath)
}

// Cleanup removes a temporary directory after a passing run, unless the
// config says to keep it; a failing run keeps it for a post-mortem.
func (r *Result) Cleanup() error {
	if !r.tempDir || r.Config.Keep || r.Err() != nil {
		return nil
	}
	return os.RemoveAll(r.Dir)
}

// WriteTable prints the accounting and the recovery of each restart.
func (r *Result) WriteTable(w io.Writer) error {
	t := r.Tally
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(n int64, what, rule string) { fmt.Fprintf(tw, "%10d  %s\t%s\n", n, what, rule) }
	entity, per := "a queue", ""
	if n := r.Config.Subscriptions; n > 0 {
		entity = fmt.Sprintf("a topic with %d subscriptions (receives and completions counted per subscription)", n)
		per = " (× subscriptions)"
	}
	fmt.Fprintf(w, "crash soak: %d SIGKILLs under load in %s on %s (seed %d; %d senders × %d in flight, %d peek-lock receivers each, %d-byte messages)\n\n",
		len(r.Restarts), r.Elapsed.Round(100*time.Millisecond), entity, r.Seed, r.Config.Senders, r.Config.Inflight, r.Config.Receivers, r.Config.Size)
	row(t.Sent, "sends", "")
	row(t.Acked, "acknowledged", "")
	row(t.SendFailed, "failed or unanswered (a kill; may or may not be stored)", "")
	row(t.UnackedDelivered, "… of those received"+per+" (they were stored)", "")
	row(t.Unique, "distinct messages received"+per, "")
	row(t.Deliveries, "deliveries", "")
	row(t.Completed, "completions confirmed", "")
	row(t.Unanswered, "completions unanswered (a kill; may or may not be applied)", "")
	row(t.UnansweredAgain, "… of those delivered again", "allowed")
	row(t.OnlyUnanswered, "… of those never seen again (applied in silence)", fmt.Sprintf("≤ %d completions under way at the kills", r.CompletionsAtKills))
	row(t.Redelivered-t.UnansweredAgain, "redeliveries after a lost lock (a kill or a refused completion)", "allowed")
	row(int64(r.Reconnects), "client reconnections", "")
	row(t.Lost, "acknowledged but never received", "must be 0")
	row(t.CompletedAgain, "completed then delivered again", "must be 0")
	row(r.Ghosts(), "received but never sent", "must be 0")
	row(t.Duplicates, "delivered again with nothing to explain it", "must be 0")
	row(r.Vanished(), "received, then gone without a completion", "must be 0")
	if err := tw.Flush(); err != nil {
		return err
	}
	if !r.Drained {
		fmt.Fprintf(w, "\nthe drain did not finish: no delivery for %s with messages missing or completions unanswered\n", r.Config.DrainTimeout)
	}
	if err := r.writeRestarts(w); err != nil {
		return err
	}
	verdict := "PASS"
	if err := r.Err(); err != nil {
		verdict = err.Error()
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}

func (r *Result) writeRestarts(w io.Writer) error {
	if len(r.Restarts) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nfirst start (empty data directory) ready in %s\n\n", ms(r.Startup))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kill\tunder load before it\tacked in that life\tready again (recovery)\tfirst send acked\t")
	var rec, first []time.Duration
	for i, rs := range r.Restarts {
		fa := "-"
		if rs.FirstAck > 0 {
			fa = ms(rs.FirstAck)
			first = append(first, rs.FirstAck)
		}
		rec = append(rec, rs.Recovery)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t\n", i+1, ms(rs.Uptime), rs.Acked, ms(rs.Recovery), fa)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nrecovery (start → first AMQP connection accepted): %s\nfirst acknowledged send after a start: %s\n",
		spread(rec), spread(first))
	return err
}

// spread is "min–max ms (median M ms)" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%d–%d ms (median %d ms, %d restarts)", s[0].Milliseconds(), s[len(s)-1].Milliseconds(),
		s[len(s)/2].Milliseconds(), len(s))
}
