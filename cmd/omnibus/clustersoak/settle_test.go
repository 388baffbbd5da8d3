package clustersoak

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// lockLostAfter answers every completion "lock lost" once released.
type lockLostAfter struct{ release chan struct{} }

func (c lockLostAfter) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	<-c.release
	return &azservicebus.Error{Code: azservicebus.CodeLockLost}
}

// TestLockLostAcrossAFaultIsAnUnknownOutcome: a completion sent just
// before a fault and answered "lock lost" once the node is back (no
// failover under way at either end) may have been applied, so it counts
// as unanswered; with no fault meanwhile, as a release (the message must
// come back).
func TestLockLostAcrossAFaultIsAnUnknownOutcome(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault bool
		want  func(bench.Tally) bool
	}{
		{"a fault began meanwhile", true, func(t bench.Tally) bool { return t.OnlyUnanswered == 1 && t.NeverCompleted == 0 }},
		{"no fault meanwhile", false, func(t bench.Tally) bool { return t.OnlyUnanswered == 0 && t.NeverCompleted == 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ld := &load{ledger: bench.NewLedger(bench.NewRunID(), 1), order: newOrderBook()}
			seq := ld.ledger.Next("")
			ld.ledger.Sent(seq)
			ld.ledger.Acked(seq)
			m := &azservicebus.ReceivedMessage{ApplicationProperties: bench.Stamp(ld.ledger.RunID(), seq, time.Now())}
			comp := lockLostAfter{release: make(chan struct{})}
			done := make(chan struct{})
			go func() {
				defer close(done)
				ld.settleAll(rcvRef{broken: func() {}}, comp, []*azservicebus.ReceivedMessage{m})
			}()
			for ld.settling.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			if c.fault { // as failover does: begun and over while the completion waits
				ld.faultBegins()()
			}
			close(comp.release)
			<-done
			if got := ld.ledger.Tally(true); !c.want(got) {
				t.Fatalf("only unanswered %d, never completed %d", got.OnlyUnanswered, got.NeverCompleted)
			}
		})
	}
}
