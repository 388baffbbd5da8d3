package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// The pipeline scenario against an in-process omnibus, with and without
// transactions: every input is completed, every result arrives once.
func TestPipelineAgainstOmnibus(t *testing.T) {
	a := startTestOmnibus(t)
	if _, err := a.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "bench-out"}); err != nil {
		t.Fatal(err)
	}
	for _, txn := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "txn"}[txn], func(t *testing.T) {
			c := Config{Scenario: ScenarioPipeline, Txn: txn, Count: 300, Connections: 3, Links: 1, Credit: 10, Inflight: 1,
				URL: "amqp://" + a.AMQPAddr().String(), User: "RootManageSharedAccessKey", Password: "SAS_KEY_VALUE",
				Queue: "bench", Quiet: true, DrainTimeout: 10 * time.Second, BrokerPID: os.Getpid()}
			ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
			defer cancel()
			r, err := Run(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("run failed: %v", err)
			}
			if r.Tally.Acked != c.Count || r.Tally.Unique != c.Count || r.Operations != 2*c.Count || r.BrokerCPU <= 0 {
				t.Errorf("tally %+v, %d operations, broker cpu %.3f s", r.Tally, r.Operations, r.BrokerCPU)
			}
			for q, want := range map[string]int64{"bench": 0, "bench-out": 0} {
				if n, err := a.Broker.Counts(q); err != nil || n.Total != want {
					t.Errorf("%s after the run: %+v %v", q, n, err)
				}
			}
		})
	}
}
