package core_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestCloseWakesWaitersRetryable: a broker closed under a waiting receive
// (a cluster node that stops leading the entity's group,
// or stops) answers it server busy, retryable: the entity exists, served
// elsewhere or again soon. Told "not found", a client of a spread queue
// whose group's leader stopped gave up on a queue that exists
// (TestClusterGroupsSpreadFailover). A deletion under the wait still
// answers not found.
func TestCloseWakesWaitersRetryable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		entity core.Entity
		delete bool
		want   core.Code
	}{
		{"queue closed", core.Entity{Kind: core.KindQueue, Name: "q"}, false, core.CodeServerBusy},
		{"partitioned queue closed", core.Entity{Kind: core.KindQueue, Name: "q", EnablePartitioning: true}, false, core.CodeServerBusy},
		{"queue deleted", core.Entity{Kind: core.KindQueue, Name: "q"}, true, core.CodeNotFound},
		{"partitioned queue deleted", core.Entity{Kind: core.KindQueue, Name: "q", EnablePartitioning: true}, true, core.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := coretest.New(t)
			env.MustCreate(t, tc.entity)
			done := make(chan error, 1)
			go func() {
				_, err := env.Broker.Receive(context.Background(), "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 1})
				done <- err
			}()
			for !env.Broker.Waiting("q") {
				runtime.Gosched()
			}
			if tc.delete {
				if err := env.Broker.DeleteEntity(t.Context(), "q"); err != nil {
					t.Fatal(err)
				}
			} else if err := env.Broker.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; core.CodeOf(err) != tc.want {
				t.Fatalf("the waiter was told %v (code %v), want code %v", err, core.CodeOf(err), tc.want)
			}
		})
	}
}
