package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

func writeResult(t *testing.T, dir, name string, r bench.Result) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// renderTable loads the results in dir and returns the table they make.
func renderTable(t *testing.T, dir string) string {
	t.Helper()
	rs, err := loadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestTableMediansAndRatioAgainstBestRabbitMQ(t *testing.T) {
	dir := t.TempDir()
	for i, rate := range []float64{30000, 10000, 20000} {
		writeResult(t, dir, "send-unsettled__omnibus__"+string(rune('1'+i))+".json",
			bench.Result{SendRate: rate, SendLatency: bench.LatencySummary{P99ms: float64(i + 1)}})
	}
	writeResult(t, dir, "send-unsettled__rabbitmq-classic__1.json", bench.Result{SendRate: 4000, SendLatency: bench.LatencySummary{P99ms: 40}})
	writeResult(t, dir, "send-unsettled__rabbitmq-quorum__1.json", bench.Result{SendRate: 5000, SendLatency: bench.LatencySummary{P99ms: 8}})
	writeResult(t, dir, "notes.json", bench.Result{}) // not a run: skipped
	out := renderTable(t, dir)
	for _, want := range []string{
		"| scenario | metric | omnibus | rabbitmq-classic | rabbitmq-quorum | omnibus vs best RabbitMQ |",
		// median 20000 of 3 runs, 4× the better RabbitMQ (quorum, 5000)
		"| send-unsettled | acked sends | 20000 msg/s (10000–30000, n=3) | 4000 msg/s | 5000 msg/s | 4.00× |",
		// latency: lower is better; best RabbitMQ p99 is 8 ms, omnibus 2 ms
		"| send-unsettled | send→ack p99 | 2.00 ms (1.00–3.00, n=3) | 40.00 ms | 8.00 ms | 4.00× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks\n%s\ngot:\n%s", want, out)
		}
	}
	if strings.Contains(out, "receive") {
		t.Errorf("table shows scenarios that were not run:\n%s", out)
	}
}

func TestTableFlagsFailedRuns(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "receive__omnibus__1.json", bench.Result{RecvRate: 100, Tally: bench.Tally{Lost: 3, LossChecked: true}})
	out := renderTable(t, dir)
	if !strings.Contains(out, "⚠ receive on omnibus: 1 of 1 runs failed") {
		t.Errorf("failed run not flagged:\n%s", out)
	}
}

func TestLoadRunsEmpty(t *testing.T) {
	if _, err := loadRuns(t.TempDir()); err == nil {
		t.Error("no error for a directory without results")
	}
}

func TestTablePresettledStored(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "send-presettled__omnibus__1.json", bench.Result{SendRate: 9000})
	writeResult(t, dir, "send-presettled__rabbitmq-classic__1.json", bench.Result{SendRate: 15000})
	tsv := "send-presettled\tomnibus\t1\t72000\t72000\t8\n" +
		"send-presettled\trabbitmq-classic\t1\t65635\t36000\t8\n" +
		"send-unsettled\tomnibus\t1\t100\t100\t8\n"
	if err := os.WriteFile(filepath.Join(dir, "stored.tsv"), []byte(tsv), 0o644); err != nil {
		t.Fatal(err)
	}
	out := renderTable(t, dir)
	// 72000/8 = 9000 stored per second against 36000/8 = 4500.
	want := "| send-presettled-stored | presettled sends found in the queue | 9000 msg/s | 4500 msg/s | 2.00× |"
	if !strings.Contains(out, want) {
		t.Errorf("table lacks\n%s\ngot:\n%s", want, out)
	}
	if strings.Contains(out, "send-unsettled-stored") {
		t.Errorf("unsettled sends got a stored row:\n%s", out)
	}
}

func TestTableWarnsOfHypervisorSteal(t *testing.T) {
	table := func(steals ...float64) string {
		t.Helper()
		dir := t.TempDir()
		for i, st := range steals {
			writeResult(t, dir, "send-unsettled__omnibus__"+string(rune('1'+i))+".json",
				bench.Result{SendRate: 100, MachineBusyPct: 70, MachineStealPct: st})
		}
		// A result without machine times (not Linux) does not count.
		writeResult(t, dir, "receive__omnibus__1.json", bench.Result{RecvRate: 100})
		return renderTable(t, dir)
	}
	if out := table(1, 12, 3); !strings.Contains(out, "⚠ the hypervisor took 3.0 % of the machine's CPU time in the median run and up to 12.0 %") {
		t.Errorf("steal not reported:\n%s", out)
	}
	if out := table(0.5, 2); strings.Contains(out, "hypervisor") {
		t.Errorf("warned of negligible steal:\n%s", out)
	}
}

// The load generator's send lag describes the run, not the broker: it is
// shown for each target, without a ratio.
func TestTableSendLagHasNoRatio(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "both-half__omnibus__1.json", bench.Result{RecvRate: 100, SendLag: bench.LatencySummary{Count: 9, P99ms: 0.5}})
	writeResult(t, dir, "both-half__rabbitmq-classic__1.json", bench.Result{RecvRate: 90, SendLag: bench.LatencySummary{Count: 9, P99ms: 2}})
	out := renderTable(t, dir)
	if want := "| both-half | of which the load generator's send lag, p99 | 0.50 ms | 2.00 ms | – |"; !strings.Contains(out, want) {
		t.Errorf("table lacks\n%s\ngot:\n%s", want, out)
	}
}

// Where the slowest 1 % of the fixed-rate run went describes the run: a
// row per stage, for each target, without a ratio.
func TestTableShowsWhereTheSlowestWent(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "both-half__omnibus__1.json", bench.Result{RecvRate: 100, Slowest: &bench.SlowestStages{Count: 5, EndToEnd: 16, Generator: 9.5, Broker: 6.5, Acked: 4}})
	writeResult(t, dir, "both-half__rabbitmq-classic__1.json", bench.Result{RecvRate: 90})
	out := renderTable(t, dir)
	for _, want := range []string{
		"| both-half | slowest 1 %: end-to-end, mean | 16.00 ms | 0.00 ms | – |",
		"| both-half | slowest 1 %: waiting in the load generator, mean | 9.50 ms | 0.00 ms | – |",
		"| both-half | slowest 1 %: handed over → delivered, mean | 6.50 ms | 0.00 ms | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks\n%s\ngot:\n%s", want, out)
		}
	}
}

func TestTableShowsTheExtraSets(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "send-unsettled-12b__omnibus__1.json", bench.Result{SendRate: 60000, BrokerCPU: 0.5, Operations: 50000})
	writeResult(t, dir, "send-unsettled-12b__rabbitmq-quorum__1.json", bench.Result{SendRate: 30000, BrokerCPU: 2, Operations: 50000})
	writeResult(t, dir, "receive-direct__omnibus__1.json", bench.Result{RecvRate: 40000, BrokerCPU: 0.6, Operations: 50000})
	out := renderTable(t, dir)
	for _, want := range []string{
		"| send-unsettled-12b | acked sends, 12 B | 60000 msg/s | 30000 msg/s | 2.00× |",
		// 0.5 s over 50,000 operations against 2 s: 10 µs, 4× less
		"| send-unsettled-12b | broker CPU per send, 12 B | 10.00 µs | 40.00 µs | 4.00× |",
		"| receive-direct | broker CPU per delivery, go-amqp writing each frame | 12.00 µs | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks\n%s\ngot:\n%s", want, out)
		}
	}
	if strings.Contains(out, "64 KiB") {
		t.Errorf("table shows a set that was not run:\n%s", out)
	}
}
