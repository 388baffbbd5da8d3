package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// Target names compare.sh gives its runs; every other target is shown
// too, but only these take part in the ratio.
const (
	targetOmnibus = "omnibus"
	rabbitPrefix  = "rabbitmq"
)

// runKey names one result: SCENARIO__TARGET__REP.json.
type runKey struct{ scenario, target string }

// runs holds every result by scenario and target, in file name order.
type runs map[runKey][]*bench.Result

// loadRuns reads DIR/*.json. Files not named SCENARIO__TARGET__REP.json
// are skipped.
func loadRuns(dir string) (runs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	out := runs{}
	for _, f := range files {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(f), ".json"), "__")
		if len(parts) != 3 {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r bench.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		k := runKey{parts[0], parts[1]}
		out[k] = append(out[k], &r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no SCENARIO__TARGET__REP.json results in %s", dir)
	}
	if err := loadStored(filepath.Join(dir, "stored.tsv"), out); err != nil {
		return nil, err
	}
	return out, nil
}

// storedSuffix marks the pseudo-scenario of what presettled sends left
// in the queue per second of sending.
const storedSuffix = "-stored"

// loadStored reads compare.sh's stored.tsv (scenario, target, rep, acked,
// found in the queue, seconds of sending) into SCENARIO-stored results
// whose SendRate is what reached the queue per second: presettled sends
// are fire and forget, and a broker may drop what it cannot keep up with.
// A missing file is no error.
func loadStored(path string, out runs) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) != 6 || !strings.Contains(f[0], "presettled") {
			continue
		}
		n, err1 := strconv.ParseFloat(f[4], 64)
		secs, err2 := strconv.ParseFloat(f[5], 64)
		if err1 != nil || err2 != nil || secs <= 0 {
			continue
		}
		k := runKey{f[0] + storedSuffix, f[1]}
		out[k] = append(out[k], &bench.Result{Label: f[1], SendRate: n / secs, Seconds: secs})
	}
	return nil
}

// metric is one row of the table.
type metric struct {
	scenario, name string
	higherBetter   bool
	value          func(*bench.Result) float64
	unit           string
	context        bool // describes the run rather than the broker: no ratio
}

// metrics are the rows, in order. The scenario names are compare.sh's.
var metrics = []metric{
	{"send-unsettled", "acked sends", true, func(r *bench.Result) float64 { return r.SendRate }, "msg/s", false},
	{"send-unsettled", "send→ack p99", false, func(r *bench.Result) float64 { return r.SendLatency.P99ms }, "ms", false},
	{"send-presettled", "presettled sends taken by the link", true, func(r *bench.Result) float64 { return r.SendRate }, "msg/s", false},
	{"send-presettled" + storedSuffix, "presettled sends found in the queue", true, func(r *bench.Result) float64 { return r.SendRate }, "msg/s", false},
	{"receive", "peek-lock receive + complete", true, func(r *bench.Result) float64 { return r.RecvRate }, "msg/s", false},
	{"both-max", "send + receive at once", true, func(r *bench.Result) float64 { return r.RecvRate }, "msg/s", false},
	{"both-max", "end-to-end p99 at max", false, func(r *bench.Result) float64 { return r.E2ELatency.P99ms }, "ms", false},
	{"both-half", "received at the fixed rate", true, func(r *bench.Result) float64 { return r.RecvRate }, "msg/s", false},
	{"both-half", "end-to-end p50 at the fixed rate", false, func(r *bench.Result) float64 { return r.E2ELatency.P50ms }, "ms", false},
	{"both-half", "end-to-end p99 at the fixed rate", false, func(r *bench.Result) float64 { return r.E2ELatency.P99ms }, "ms", false},
	{"both-half", "of which the load generator's send lag, p99", false, func(r *bench.Result) float64 { return r.SendLag.P99ms }, "ms", true},
	// Where the slowest 1 % went (bench.SlowestStages): before the load
	// generator handed them over (its pacing and its own window of sends
	// in flight, which fills when acceptances come late), and after.
	{"both-half", "slowest 1 %: end-to-end, mean", false, func(r *bench.Result) float64 { return slowest(r).EndToEnd }, "ms", true},
	{"both-half", "slowest 1 %: waiting in the load generator, mean", false, func(r *bench.Result) float64 { return slowest(r).Generator }, "ms", true},
	{"both-half", "slowest 1 %: handed over → delivered, mean", false, func(r *bench.Result) float64 { return slowest(r).Broker }, "ms", true},
	{"send-unsettled", "broker CPU per send", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"receive", "broker CPU per delivery", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"both-max", "broker CPU per send or delivery", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"send-unsettled", "client CPU per send", false, (*bench.Result).ClientCPUPerOp, "µs", false},
	{"receive", "client CPU per delivery", false, (*bench.Result).ClientCPUPerOp, "µs", false},
	// compare.sh's EXTRA sets, shown when they ran.
	{"send-unsettled-direct", "acked sends, go-amqp writing each frame", true, func(r *bench.Result) float64 { return r.SendRate }, "msg/s", false},
	{"send-unsettled-direct", "broker CPU per send, go-amqp writing each frame", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"receive-direct", "peek-lock receive + complete, go-amqp writing each frame", true, func(r *bench.Result) float64 { return r.RecvRate }, "msg/s", false},
	{"receive-direct", "broker CPU per delivery, go-amqp writing each frame", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"send-unsettled-12b", "acked sends, 12 B", true, func(r *bench.Result) float64 { return r.SendRate }, "msg/s", false},
	{"send-unsettled-12b", "broker CPU per send, 12 B", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"receive-12b", "peek-lock receive + complete, 12 B", true, func(r *bench.Result) float64 { return r.RecvRate }, "msg/s", false},
	{"receive-12b", "broker CPU per delivery, 12 B", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"send-unsettled-64k", "acked sends, 64 KiB", true, func(r *bench.Result) float64 { return r.SendRate }, "msg/s", false},
	{"send-unsettled-64k", "broker CPU per send, 64 KiB", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
	{"receive-64k", "peek-lock receive + complete, 64 KiB", true, func(r *bench.Result) float64 { return r.RecvRate }, "msg/s", false},
	{"receive-64k", "broker CPU per delivery, 64 KiB", false, (*bench.Result).BrokerCPUPerOp, "µs", false},
}

// slowest is r's slowest-1 % breakdown, zero when the run has none.
func slowest(r *bench.Result) bench.SlowestStages {
	if r.Slowest == nil {
		return bench.SlowestStages{}
	}
	return *r.Slowest
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// targets lists the targets present: omnibus first, then the rest sorted.
func (rs runs) targets() []string {
	seen := map[string]bool{}
	for k := range rs {
		seen[k.target] = true
	}
	var ts []string
	for t := range seen {
		if t != targetOmnibus {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	if seen[targetOmnibus] {
		ts = append([]string{targetOmnibus}, ts...)
	}
	return ts
}

// cell is the median of one metric over a target's runs.
type cell struct {
	median, lo, hi float64
	n              int
	failed         int // runs whose verification or operations failed
}

func (rs runs) cell(m metric, target string) (cell, bool) {
	results := rs[runKey{m.scenario, target}]
	if len(results) == 0 {
		return cell{}, false
	}
	var xs []float64
	c := cell{n: len(results)}
	for _, r := range results {
		xs = append(xs, m.value(r))
		if r.Err() != nil {
			c.failed++
		}
	}
	c.median, c.lo, c.hi = median(xs), slices.Min(xs), slices.Max(xs)
	return c, true
}

// writeTable prints one row per metric: the median (and range) per
// target, and how omnibus compares with the better RabbitMQ queue type
// (× > 1 means omnibus is better: more throughput or less latency).
func writeTable(w io.Writer, rs runs) error {
	ts := rs.targets()
	var b strings.Builder
	b.WriteString("| scenario | metric |")
	for _, t := range ts {
		fmt.Fprintf(&b, " %s |", t)
	}
	b.WriteString(" omnibus vs best RabbitMQ |\n|---|---|")
	for range ts {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	var notes []string
	for _, m := range metrics {
		var row []string
		var omni, best cell
		haveOmni, haveBest := false, false
		seen := false
		for _, t := range ts {
			c, ok := rs.cell(m, t)
			if !ok {
				row = append(row, "–")
				continue
			}
			seen = true
			row = append(row, formatCell(c, m.unit))
			if c.failed > 0 {
				notes = append(notes, fmt.Sprintf("%s on %s: %d of %d runs failed verification or had errors", m.scenario, t, c.failed, c.n))
			}
			switch {
			case t == targetOmnibus:
				omni, haveOmni = c, true
			case strings.HasPrefix(t, rabbitPrefix):
				if !haveBest || better(m, c.median, best.median) {
					best, haveBest = c, true
				}
			}
		}
		if !seen {
			continue
		}
		ratio := "–"
		if haveOmni && haveBest && !m.context {
			ratio = formatRatio(m, omni.median, best.median)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.scenario, m.name, strings.Join(row, " | "), ratio)
	}
	if n := rs.stealNote(); n != "" {
		notes = append(notes, n)
	}
	slices.Sort(notes)
	notes = slices.Compact(notes)
	for _, n := range notes {
		fmt.Fprintf(&b, "\n⚠ %s", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// noticeableSteal is the share of the machine's CPU time (percent) taken
// by the hypervisor in some run above which the table warns: throughput
// and latency then describe a slower machine than the one it names.
const noticeableSteal = 5

// stealNote is a warning when the hypervisor took a noticeable share of
// the machine's CPU time during some run, or "".
func (rs runs) stealNote() string {
	var xs []float64
	for _, results := range rs {
		for _, r := range results {
			if r.MachineBusyPct > 0 {
				xs = append(xs, r.MachineStealPct)
			}
		}
	}
	if len(xs) == 0 || slices.Max(xs) < noticeableSteal {
		return ""
	}
	return fmt.Sprintf("the hypervisor took %.1f %% of the machine's CPU time in the median run and up to %.1f %% (other guests on the host): "+
		"rates and latencies are those of a slower, noisier machine", median(xs), slices.Max(xs))
}

func better(m metric, a, b float64) bool {
	if m.higherBetter {
		return a > b
	}
	return a < b
}

// formatRatio says how many times better omnibus is than best.
func formatRatio(m metric, omni, best float64) string {
	num, den := omni, best
	if !m.higherBetter {
		num, den = best, omni
	}
	if den <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", num/den)
}

func formatCell(c cell, unit string) string {
	s := fmt.Sprintf("%s %s", num(c.median), unit)
	if c.n > 1 {
		s += fmt.Sprintf(" (%s–%s, n=%d)", num(c.lo), num(c.hi), c.n)
	}
	if c.failed > 0 {
		s += " ⚠"
	}
	return s
}

// num prints throughput as whole numbers and latency with 2 digits.
func num(x float64) string {
	if x >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
