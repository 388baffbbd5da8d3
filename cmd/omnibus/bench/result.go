package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
)

// Result is the outcome of one run: what was measured and what the
// ledger verified. It is what --json writes.
type Result struct {
	Label       string    `json:"label"`
	Scenario    string    `json:"scenario"`
	RunID       string    `json:"runId"`
	Started     time.Time `json:"started"`
	Seconds     float64   `json:"seconds"` // measured span (after warm-up)
	Size        int       `json:"size"`
	Connections int       `json:"connections"`
	Links       int       `json:"links"`
	Inflight    int       `json:"inflight"`
	Credit      int       `json:"credit"`
	Presettled  bool      `json:"presettled"`
	RAD         bool      `json:"rad"`
	Durable     bool      `json:"durable"`
	SDK         bool      `json:"sdk"`
	// DirectWrites: go-amqp wrote each frame itself, a goroutine per send.
	DirectWrites bool    `json:"directWrites,omitempty"`
	TargetRate   float64 `json:"targetRate,omitempty"`

	Sent        int64          `json:"sent"`     // measured acknowledged sends
	Received    int64          `json:"received"` // measured deliveries
	Errors      int64          `json:"errors"`
	SendRate    float64        `json:"sendRate"` // messages/s
	RecvRate    float64        `json:"recvRate"`
	SendLatency LatencySummary `json:"sendLatency"` // send → acknowledgement
	E2ELatency  LatencySummary `json:"e2eLatency"`  // send timestamp → delivery
	// At a target rate: how late senders got their scheduled slots (the
	// load generator's own share of the end-to-end latency).
	SendLag LatencySummary `json:"sendLag"`
	// At a target rate, with receivers: where the slowest 1 % of the
	// end-to-end latencies were spent.
	Slowest *SlowestStages `json:"slowest,omitempty"`
	Tally   Tally          `json:"tally"`
	// CPU time from the first timed send to the end of the drain (warm-up
	// included), and the sends acknowledged plus deliveries made in it.
	ClientCPU  float64 `json:"clientCpuSeconds"`
	BrokerCPU  float64 `json:"brokerCpuSeconds,omitempty"` // with --broker-pid
	Operations int64   `json:"operations"`
	// The whole machine over the same span (Linux), in percent of all its
	// CPU time: busy, and stolen by the hypervisor for other guests.
	MachineBusyPct  float64  `json:"machineBusyPercent,omitempty"`
	MachineStealPct float64  `json:"machineStealPercent,omitempty"`
	ErrorSample     []string `json:"errorSample,omitempty"`
	Timeline        []Point  `json:"timeline"`

	sendHist, e2eHist Histogram // for the plot
}

// LatencySummary condenses a [Histogram], in milliseconds.
type LatencySummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50ms  float64 `json:"p50ms"`
	P90ms  float64 `json:"p90ms"`
	P99ms  float64 `json:"p99ms"`
	P999ms float64 `json:"p999ms"`
	MaxMs  float64 `json:"maxMs"`
}

func summarize(h *Histogram) LatencySummary {
	return LatencySummary{
		Count: h.Count(), MeanMs: ms(h.Mean()),
		P50ms: ms(h.Quantile(0.5)), P90ms: ms(h.Quantile(0.9)),
		P99ms: ms(h.Quantile(0.99)), P999ms: ms(h.Quantile(0.999)), MaxMs: ms(h.Max()),
	}
}

// result fills a Result from the collected stats.
func (s *Stats) result(c *Config, runID string) *Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &Result{
		Label: c.Label, Scenario: c.Scenario, RunID: runID, Started: s.start,
		Size: c.Size, Connections: c.Connections, Links: c.Links, Inflight: c.Inflight,
		Credit: c.Credit, Presettled: c.Presettled, RAD: c.RAD, Durable: c.Durable, SDK: c.SDK, DirectWrites: c.DirectWrites,
		TargetRate: c.Rate,
		Sent:       s.sent, Received: s.received, Errors: s.errs,
		SendRate:    s.rateLocked(s.sent, s.lastSend),
		RecvRate:    s.rateLocked(s.received, s.lastRecv),
		SendLatency: summarize(&s.sendLat), E2ELatency: summarize(&s.e2eLat), SendLag: summarize(&s.sendLag),
		ErrorSample: append([]string(nil), s.errSample...),
		Timeline:    append([]Point(nil), s.timeline...),
		sendHist:    s.sendLat, e2eHist: s.e2eLat,
	}
	last := s.measureFrom
	for _, t := range []time.Time{s.lastSend, s.lastRecv} {
		if t.After(last) {
			last = t
		}
	}
	r.Seconds = last.Sub(s.measureFrom).Seconds()
	if st, ok := s.stages.slowest(s.measureFrom); ok {
		r.Slowest = &st
	}
	return r
}

// Err is nil when the run had no errors and its accounting is clean.
func (r *Result) Err() error {
	if err := r.Tally.Err(); err != nil {
		return err
	}
	if r.Errors > 0 {
		return fmt.Errorf("%d operations failed (first: %s)", r.Errors, first(r.ErrorSample))
	}
	return nil
}

func first(s []string) string {
	if len(s) == 0 {
		return "?"
	}
	return s[0]
}

// WriteTable prints the result for a person.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(key, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{key}, args...)...)
	}
	p("target", "%s — scenario %s, run %s", r.Label, r.Scenario, r.RunID)
	mode := "unsettled"
	if r.Presettled {
		mode = "presettled"
	}
	recv := "peek-lock"
	if r.RAD {
		recv = "receive-and-delete"
	}
	writes := "gathered"
	if r.DirectWrites {
		writes = "direct"
	}
	p("load", "%d B, %d connection(s) × %d link(s), %s sends %d in flight, %s credit %d, durable %v, sdk %v, writes %s",
		r.Size, r.Connections, r.Links, mode, r.Inflight, recv, r.Credit, r.Durable, r.SDK, writes)
	if r.TargetRate > 0 {
		p("rate", "target %.0f msg/s", r.TargetRate)
	}
	p("measured", "%.2f s: sent %d (%.0f msg/s), received %d (%.0f msg/s)", r.Seconds, r.Sent, r.SendRate, r.Received, r.RecvRate)
	for _, l := range []struct {
		name string
		s    LatencySummary
	}{{"send→ack", r.SendLatency}, {"end-to-end", r.E2ELatency}, {"send lag", r.SendLag}} {
		if l.s.Count > 0 {
			p(l.name, "p50 %.2f ms, p90 %.2f, p99 %.2f, p99.9 %.2f, max %.2f (n=%d)",
				l.s.P50ms, l.s.P90ms, l.s.P99ms, l.s.P999ms, l.s.MaxMs, l.s.Count)
		}
	}
	if st := r.Slowest; st != nil {
		p("slowest 1 %", "end-to-end %.2f ms on average (n=%d): %.2f before the load generator handed them to the client library "+
			"(pacing, its own window of %d in flight, CPU), %.2f from there to the delivery (to the broker's acceptance: %.2f)",
			st.EndToEnd, st.Count, st.Generator, r.Inflight, st.Broker, st.Acked)
	}
	if r.Operations > 0 {
		cpu := fmt.Sprintf("client %.1f µs per send or delivery", r.ClientCPUPerOp())
		if r.BrokerCPU > 0 {
			cpu += fmt.Sprintf(", broker %.1f µs", r.BrokerCPUPerOp())
		}
		p("cpu", "%s (%d sends and deliveries)", cpu, r.Operations)
	}
	if r.MachineBusyPct > 0 {
		p("machine", "%.0f %% busy, %.1f %% stolen by the hypervisor", r.MachineBusyPct, r.MachineStealPct)
	}
	t := r.Tally
	loss := "not checked"
	if t.LossChecked {
		loss = fmt.Sprint(t.Lost)
	}
	p("verified", "sent %d, acked %d, failed %d; delivered %d (unique %d, explained redeliveries %d); lost %s, duplicates %d, out of order %d, foreign %d",
		t.Sent, t.Acked, t.SendFailed, t.Deliveries, t.Unique, t.Redelivered, loss, t.Duplicates, t.OutOfOrder, t.Foreign)
	if len(t.Partitions) > 1 {
		p("partitions", "%d delivered from (top 16 bits of the broker's sequence numbers)", len(t.Partitions))
	}
	status := "OK"
	if err := r.Err(); err != nil {
		status = "FAILED: " + err.Error()
	}
	p("result", "%s (%d errors)", status, r.Errors)
	return tw.Flush()
}

// ClientCPUPerOp is the load generator's CPU time per acknowledged send
// or delivery, in microseconds (0 when there were none).
func (r *Result) ClientCPUPerOp() float64 { return perOp(r.ClientCPU, r.Operations) }

// BrokerCPUPerOp is the broker's (--broker-pid) CPU time per acknowledged
// send or delivery, in microseconds (0 when not measured).
func (r *Result) BrokerCPUPerOp() float64 { return perOp(r.BrokerCPU, r.Operations) }

func perOp(seconds float64, ops int64) float64 {
	if ops <= 0 {
		return 0
	}
	return seconds * 1e6 / float64(ops)
}

// WriteJSON writes the result to path.
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
