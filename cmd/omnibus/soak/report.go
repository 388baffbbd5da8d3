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

// Restart is one kill (or disk fault) and the start after it.
type Restart struct {
	DiskFault *DiskFault    // nil: a SIGKILL
	Uptime    time.Duration // how long the broker ran under load (from its first acknowledged send) before the kill
	Acked     int64         // sends acknowledged in that life
	Recovery  time.Duration // from starting the process to the first AMQP connection it accepted
	FirstAck  time.Duration // from starting the process to the first send acknowledged after it (0: none)
}

// DiskFault is what one failing disk did: the broker's write-ahead log
// fsyncs failed under load, then it was stopped with SIGTERM.
type DiskFault struct {
	// The sends in flight when the disk failed, and what they got: stored,
	// the outcome unknown (com.microsoft:timeout), refused (server-busy),
	// or anything else (a broken connection). Unanswered is how many had
	// no answer when the soak gave up waiting for them: must be 0.
	InFlight, Stored, Unknown, Refused, Other, Unanswered int64
	Stop                                                  time.Duration // from SIGTERM to the process's exit
	ExitStatus                                            int           // must be 1: a disk fault was seen
}

// maxStop is how long a broker may take to exit after SIGTERM on a
// failed disk.
const maxStop = 5 * time.Second

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
	for i, rs := range r.Restarts {
		df := rs.DiskFault
		switch {
		case df == nil:
		case df.Unanswered > 0:
			bad = append(bad, fmt.Sprintf("restart %d: %d of the %d sends in flight when the disk failed were never answered", i+1, df.Unanswered, df.InFlight))
		case df.ExitStatus != 1 || df.Stop > maxStop:
			bad = append(bad, fmt.Sprintf("restart %d: after a disk fault SIGTERM ended the broker in %s with exit status %d, want within %s and 1",
				i+1, ms(df.Stop), df.ExitStatus, maxStop))
		}
	}
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
	faults := r.diskFaults()
	fmt.Fprintf(w, "crash soak: %d SIGKILLs and %d disk faults under load in %s on %s (seed %d; %d senders × %d in flight, %d peek-lock receivers each, %d-byte messages)\n\n",
		len(r.Restarts)-len(faults), len(faults), r.Elapsed.Round(100*time.Millisecond), entity, r.Seed, r.Config.Senders, r.Config.Inflight, r.Config.Receivers, r.Config.Size)
	row(t.Sent, "sends", "")
	row(t.Acked, "acknowledged", "")
	row(t.SendFailed, "failed or unanswered (a kill or disk fault; may or may not be stored)", "")
	row(t.UnackedDelivered, "… of those received"+per+" (they were stored)", "")
	row(t.Unique, "distinct messages received"+per, "")
	row(t.Deliveries, "deliveries", "")
	row(t.Completed, "completions confirmed", "")
	row(t.Unanswered, "completions unanswered or of unknown outcome (a kill or disk fault; may or may not be applied)", "")
	row(t.UnansweredAgain, "… of those delivered again", "allowed")
	row(t.OnlyUnanswered, "… of those never seen again (applied in silence)", fmt.Sprintf("≤ %d completions under way at the kills and faults", r.CompletionsAtKills))
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
	if err := r.writeDiskFaults(w, faults); err != nil {
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
	fmt.Fprintln(tw, "restart\tafter\tunder load before it\tacked in that life\tready again (recovery)\tfirst send acked\t")
	var rec, first []time.Duration
	for i, rs := range r.Restarts {
		fa := "-"
		if rs.FirstAck > 0 {
			fa = ms(rs.FirstAck)
			first = append(first, rs.FirstAck)
		}
		rec = append(rec, rs.Recovery)
		cause := "SIGKILL"
		if rs.DiskFault != nil {
			cause = "disk fault"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t\n", i+1, cause, ms(rs.Uptime), rs.Acked, ms(rs.Recovery), fa)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nrecovery (start → first AMQP connection accepted): %s\nfirst acknowledged send after a start: %s\n",
		spread(rec), spread(first))
	return err
}

// diskFaults returns the restarts that followed a disk fault.
func (r *Result) diskFaults() []*DiskFault {
	var dfs []*DiskFault
	for _, rs := range r.Restarts {
		if rs.DiskFault != nil {
			dfs = append(dfs, rs.DiskFault)
		}
	}
	return dfs
}

// writeDiskFaults prints what each disk fault did to the sends in flight
// and how the broker stopped.
func (r *Result) writeDiskFaults(w io.Writer, dfs []*DiskFault) error {
	if len(dfs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\ndisk faults (every fsync of the write-ahead log fails from then on; then SIGTERM):\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tsends in flight\tstored\toutcome unknown (timeout)\trefused (server-busy)\tother\tnever answered\tSIGTERM → exit\texit status\t")
	var stops []time.Duration
	for i, df := range dfs {
		stops = append(stops, df.Stop)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", i+1, df.InFlight, df.Stored, df.Unknown, df.Refused, df.Other,
			df.Unanswered, ms(df.Stop), df.ExitStatus)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nSIGTERM → exit after a disk fault: %s (must be ≤ %s, exit status 1)\n", spread(stops), maxStop)
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
