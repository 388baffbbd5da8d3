package conformance

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/core"
)

// startOmnibus starts an in-memory omnibus with the given faults and
// returns a target for it with every feature on.
func startOmnibus(t *testing.T, faults core.Faults) (*Target, func()) {
	t.Helper()
	a, err := app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-", Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	stop := func() { _ = a.Shutdown(context.Background()) }
	t.Cleanup(stop)
	return &Target{ConnectionString: a.ConnectionString(), HTTP: "http://" + a.HTTPAddr().String(), CrossProtocolLocks: true}, stop
}

func resultOf(t *testing.T, rep *Report, name string) Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", name, rep.Results)
	return Result{}
}

// TestStrictRunFailsOnUnexpectedSkip runs scenarios against a real
// omnibus whose target leaves out cross-protocol locks: the xproto
// scenario skips, which a strict run (the in-process one) turns into a
// failure, while the Slow scenario's declared skip stays a skip.
func TestStrictRunFailsOnUnexpectedSkip(t *testing.T) {
	tg, _ := startOmnibus(t, core.Faults{})
	tg.CrossProtocolLocks = false
	only := regexp.MustCompile(`^(send-then-receive|xproto-amqp-lock-rest-complete|autodelete-deletes-idle-queue)$`)
	for _, strict := range []bool{false, true} {
		rep, err := Run(t.Context(), tg, Options{Only: only, Strict: strict, Budget: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if r := resultOf(t, rep, "send-then-receive"); r.Status != Passed {
			t.Errorf("strict %v: send-then-receive %s: %s", strict, r.Status, r.Detail)
		}
		if r := resultOf(t, rep, "autodelete-deletes-idle-queue"); r.Status != Skipped || !r.ExpectedSkip {
			t.Errorf("strict %v: the Slow scenario is %s (expected skip %v): %s", strict, r.Status, r.ExpectedSkip, r.Detail)
		}
		x := resultOf(t, rep, "xproto-amqp-lock-rest-complete")
		switch {
		case strict && (x.Status != Failed || !strings.Contains(x.Detail, "unexpected skip")):
			t.Errorf("strict run: an undeclared skip is %s: %s", x.Status, x.Detail)
		case !strict && x.Status != Skipped:
			t.Errorf("lenient run: the xproto scenario without cross-protocol locks is %s: %s", x.Status, x.Detail)
		}
	}
}

// TestProveFailureJudgesEachClaim proves one claim against a real
// omnibus with the fault on, and shows that the proof fails when the
// fault is missing (the scenario passes) or when the scenario fails at
// another check than the one it names.
func TestProveFailureJudgesEachClaim(t *testing.T) {
	only := regexp.MustCompile(`^fifo-order-single-receiver$`)
	start := func(faults core.Faults) func(Fault) (*Target, func(), error) {
		return func(Fault) (*Target, func(), error) {
			tg, stop := startOmnibus(t, faults)
			return tg, stop, nil
		}
	}
	proofs, err := ProveFailure(t.Context(), []Fault{FaultBreakFIFO}, start(core.Faults{BreakFIFO: true}), Options{Only: only})
	if err != nil {
		t.Fatal(err)
	}
	if unproved, total := Unproved(proofs); unproved != 0 || total != 1 {
		t.Fatalf("with break-fifo on: %d of %d unproved: %+v", unproved, total, proofs[0].Verdicts)
	}
	proofs, err = ProveFailure(t.Context(), []Fault{FaultBreakFIFO}, start(core.Faults{}), Options{Only: only})
	if err != nil {
		t.Fatal(err)
	}
	if v := proofs[0].Verdicts; len(v) != 1 || v[0].Proved || !strings.Contains(v[0].Why, "passed") {
		t.Fatalf("without the fault the claim was judged %+v", v)
	}
}

func TestJudge(t *testing.T) {
	d := Detection{Fault: FaultBreakFIFO, Check: "order"}
	for _, c := range []struct {
		res  Result
		ok   bool
		want string
	}{
		{Result{Status: Failed, FailedCheck: "order"}, true, ""},
		{Result{Status: Passed}, false, "unnoticed"},
		{Result{Status: Skipped, Detail: "no --http"}, false, "skipped"},
		{Result{Status: Failed, FailedCheck: "send"}, false, `failed at check "send"`},
		{Result{Status: Failed, FailedCheck: ""}, false, `failed at check ""`},
		{Result{Status: Failed, FailedCheck: "order", Panicked: true}, false, "crashed"},
		{Result{Status: Failed, FailedCheck: "order", OverBudget: true}, false, "hung"},
		{Result{Status: Failed, FailedCheck: "order", FailedByError: true}, false, "with an error"},
	} {
		ok, why := judge(d, c.res)
		if ok != c.ok || !strings.Contains(why, c.want) {
			t.Errorf("judge(%+v) = %v %q, want %v %q", c.res, ok, why, c.ok, c.want)
		}
	}
}

// TestCheckNamesTheFirstFailure: the check under way at the first
// failure is the one reported; a panic and a spent budget are told apart
// from an assertion.
func TestCheckNamesTheFirstFailure(t *testing.T) {
	tg := &Target{}
	r := runOne(t.Context(), tg, Scenario{Name: "c", Run: func(t *T) {
		t.Check("first")
		t.Check("second")
		t.Errorf("a")
		t.Check("third")
		t.Fatalf("b")
	}}, time.Second, false)
	if r.FailedCheck != "second" || r.Detail != "[second] a; [third] b" || r.Panicked || r.OverBudget {
		t.Errorf("result %+v", r)
	}
	r = runOne(t.Context(), tg, Scenario{Name: "p", Run: func(t *T) {
		t.Check("order")
		var m map[int]int
		m[1] = 1
	}}, time.Second, false)
	if !r.Panicked || r.Status != Failed {
		t.Errorf("a panic: %+v", r)
	}
	r = runOne(t.Context(), tg, Scenario{Name: "h", Run: func(t *T) {
		t.Check("order")
		wait(t, time.Hour)
	}}, 50*time.Millisecond, false)
	if !r.OverBudget || r.Status != Failed || !r.FailedByError {
		t.Errorf("a hang: %+v", r)
	}
	r = runOne(t.Context(), tg, Scenario{Name: "e", Run: func(t *T) {
		t.Check("order")
		t.must(errors.New("refused"), "sending")
	}}, time.Second, false)
	if r.FailedCheck != "order" || !r.FailedByError || r.Detail != "[order] error: sending: refused" {
		t.Errorf("an operation that failed: %+v", r)
	}
	r = runOne(t.Context(), tg, Scenario{Name: "ae", Run: func(t *T) {
		t.Check("order")
		t.Errorf("out of order")
		t.must(errors.New("refused"), "sending")
	}}, time.Second, false)
	if r.FailedCheck != "order" || r.FailedByError {
		t.Errorf("an assertion, then an error: %+v", r)
	}
}

// idleReceiver receives nothing: each call waits for its context.
type idleReceiver struct{}

func (idleReceiver) ReceiveMessages(ctx context.Context, _ int, _ *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestReceiveNoneNeedsItsWholeWait: the scenario's budget running out
// during ReceiveNone is an error, not "nothing arrived"; a wait that
// passes within the budget is.
func TestReceiveNoneNeedsItsWholeWait(t *testing.T) {
	tg := &Target{}
	r := runOne(t.Context(), tg, Scenario{Name: "budget", Run: func(t *T) {
		t.Check("none")
		t.ReceiveNone(idleReceiver{}, time.Hour, "nothing")
	}}, 100*time.Millisecond, false)
	if r.Status != Failed || !r.FailedByError || !strings.Contains(r.Detail, "time budget exhausted") {
		t.Errorf("ReceiveNone cut short by the budget: %+v", r)
	}
	r = runOne(t.Context(), tg, Scenario{Name: "waited", Run: func(t *T) {
		t.ReceiveNone(idleReceiver{}, 50*time.Millisecond, "nothing")
	}}, 10*time.Second, false)
	if r.Status != Passed {
		t.Errorf("ReceiveNone over its whole wait: %+v", r)
	}
	r = runOne(t.Context(), tg, Scenario{Name: "n", Run: func(t *T) {
		t.ReceiveN(idleReceiver{}, 1, 50*time.Millisecond)
	}}, 10*time.Second, false)
	if r.Status != Failed || r.FailedByError || !strings.Contains(r.Detail, "received 0 of 1") {
		t.Errorf("ReceiveN that got nothing within its wait: %+v", r)
	}
}
