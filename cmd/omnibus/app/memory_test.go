package app

import (
	"context"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core/membudget"
)

// MaxMemory reaches both fronts as one budget, reported in the metrics;
// 0 means the machine's share and < 0 none.
func TestMaxMemoryOption(t *testing.T) {
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-",
		MetricsAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t), MaxMemory: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	if got := series(t, scrapeMetrics(t, a), "omnibus_memory_budget_bytes"); got != 3<<20 {
		t.Fatalf("omnibus_memory_budget_bytes = %v, want %d", got, 3<<20)
	}
	a.Memory.Acquire(1000)
	if got := series(t, scrapeMetrics(t, a), "omnibus_memory_held_bytes"); got != 1000 {
		t.Fatalf("omnibus_memory_held_bytes = %v, want 1000", got)
	}
	a.Memory.Release(1000)
	if def, _ := membudget.DefaultLimit(); memoryLimit(0) != def || memoryLimit(-1) != 0 {
		t.Fatalf("memoryLimit(0) = %d (want %d), memoryLimit(-1) = %d (want 0: none)", memoryLimit(0), def, memoryLimit(-1))
	}
}
