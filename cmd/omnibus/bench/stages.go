package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// stageLog follows every message of a run at a target rate through its
// stages, so that a run can say where its slowest end-to-end latencies
// were spent (see [SlowestStages]): before the load generator handed the
// message to the client library (its pacing, and waiting for its own
// window of --inflight unacknowledged sends), from there to the broker's
// acceptance, and from there to the delivery.
//
// A histogram per stage cannot say this: the messages at one stage's p99
// are not those at the end-to-end p99. The log keeps four times per
// message (32 bytes; 6.4 MB for a 10 s run at 20k msg/s), indexed by the
// ledger's dense sequence numbers.
type stageLog struct {
	start time.Time

	mu    sync.Mutex // guards the slice
	times []stageTimes
}

// stageTimes are a message's moments, in nanoseconds since the run's
// start; 0 is not (yet) known.
type stageTimes struct {
	sched   int64 // the time it was scheduled for: its send timestamp
	handed  int64 // handed to the client library
	acked   int64 // the broker's acceptance arrived
	arrived int64 // its delivery arrived (first one)
}

func newStageLog(start time.Time) *stageLog { return &stageLog{start: start} }

// at returns the entry of message seq, growing the log; nil for seq 0.
// The caller holds l.mu.
func (l *stageLog) at(seq uint64) *stageTimes {
	if seq == 0 {
		return nil
	}
	if n := int(seq); n > len(l.times) {
		l.times = slices.Grow(l.times, n-len(l.times))[:n]
	}
	return &l.times[seq-1]
}

func (l *stageLog) since(t time.Time) int64 { return max(1, int64(t.Sub(l.start))) }

// handed records that message seq, scheduled for sched, went to the
// client library at t.
func (l *stageLog) handed(seq uint64, sched, t time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.at(seq); e != nil {
		e.sched, e.handed = l.since(sched), l.since(t)
	}
}

// acked records that the broker's acceptance of message seq arrived at t.
func (l *stageLog) acked(seq uint64, t time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.at(seq); e != nil {
		e.acked = l.since(t)
	}
}

// arrived records a delivery of message seq at t; only the first counts.
func (l *stageLog) arrived(seq uint64, t time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.at(seq); e != nil && e.arrived == 0 {
		e.arrived = l.since(t)
	}
}

// SlowestStages is where the slowest 1 % of a run's end-to-end latencies
// (those at or above the p99) were spent, on average, in milliseconds.
// Generator + Broker = EndToEnd.
type SlowestStages struct {
	Count    int     `json:"count"`    // messages in the slowest 1 %
	EndToEnd float64 `json:"endToEnd"` // scheduled send time → delivery
	// Generator: scheduled send time → handed to the client library: the
	// load generator's pacing, its waiting for a free place in its own
	// window of --inflight unacknowledged sends, and its waiting for a CPU.
	Generator float64 `json:"generator"`
	// Broker: handed to the client library → delivery: the client
	// library's sending, the broker's send path, and the delivery.
	Broker float64 `json:"broker"`
	// Acked: handed to the client library → the broker's acceptance
	// (the send's share of Broker; the delivery may come before it).
	Acked float64 `json:"acked"`
}

// slowest sums up the slowest 1 % of the messages scheduled from
// measureFrom on, delivered and acknowledged; false when there are none.
func (l *stageLog) slowest(measureFrom time.Time) (SlowestStages, bool) {
	if l == nil {
		return SlowestStages{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	from := l.since(measureFrom)
	var done []stageTimes
	for _, e := range l.times {
		if e.sched >= from && e.handed != 0 && e.acked != 0 && e.arrived != 0 {
			done = append(done, e)
		}
	}
	if len(done) == 0 {
		return SlowestStages{}, false
	}
	slices.SortFunc(done, func(a, b stageTimes) int {
		return cmp.Compare(b.arrived-b.sched, a.arrived-a.sched)
	})
	tail := done[:max(1, len(done)/100)]
	var s SlowestStages
	for _, e := range tail {
		s.EndToEnd += ms(time.Duration(e.arrived - e.sched))
		s.Generator += ms(time.Duration(e.handed - e.sched))
		s.Broker += ms(time.Duration(e.arrived - e.handed))
		s.Acked += ms(time.Duration(e.acked - e.handed))
	}
	n := float64(len(tail))
	s.Count = len(tail)
	s.EndToEnd, s.Generator, s.Broker, s.Acked = s.EndToEnd/n, s.Generator/n, s.Broker/n, s.Acked/n
	return s, true
}

// writeCSV writes every message's moments to path: a comment line with
// the run's start (wall clock, RFC 3339 with nanoseconds, and Unix
// nanoseconds, so that the broker's log lines and GC traces can be laid
// beside it) and where the warm-up ends, a header, then one line per
// message in send order: its scheduled time, when it was handed to the
// client library, when its acceptance and its (first) delivery arrived,
// in milliseconds since the start; empty where not known.
func (l *stageLog) writeCSV(path string, measureFrom time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing stages: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# start %s (unix ns %d); measured from %.3f ms\n", l.start.UTC().Format(time.RFC3339Nano),
		l.start.UnixNano(), float64(measureFrom.Sub(l.start))/1e6)
	fmt.Fprintln(w, "sched_ms,handed_ms,acked_ms,arrived_ms")
	for _, e := range l.times {
		for i, v := range [4]int64{e.sched, e.handed, e.acked, e.arrived} {
			if i > 0 {
				w.WriteByte(',')
			}
			if v != 0 {
				fmt.Fprintf(w, "%.3f", float64(v)/1e6)
			}
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing stages: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing stages: %w", err)
	}
	return nil
}
