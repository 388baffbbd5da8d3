package conformance

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Protocol says which client a scenario drives.
type Protocol string

// Protocols.
const (
	AMQP Protocol = "amqp" // the official Go SDK or go-amqp
	REST Protocol = "rest" // net/http against the REST runtime or ATOM management
	Both Protocol = "amqp+rest"
)

// Fault names a deliberate non-conformance of omnibus's fault-injection
// mode that a scenario is expected to detect.
type Fault string

// Faults the suite can prove it detects, each a switch of the in-process
// broker's core (core.Faults).
const (
	FaultIgnoreLockExpiry    Fault = "ignore-lock-expiry"    // message and session locks never lapse
	FaultBreakFIFO           Fault = "break-fifo"            // the newest available message is handed out first
	FaultIgnoreMessageExpiry Fault = "ignore-message-expiry" // messages never expire (time to live is ignored)
	FaultIgnoreComplete      Fault = "ignore-complete"       // a complete is acknowledged but the message stays locked, back when the lock lapses
	FaultDropDeadLetters     Fault = "drop-dead-letters"     // dead-lettered messages are deleted, never reach the dead-letter subqueue
	FaultTxnAtOnce           Fault = "txn-at-once"           // a transaction's operations take effect at once; commit and rollback change nothing
	FaultIgnoreFilters       Fault = "ignore-filters"        // every subscription gets every message, whatever its rules
	FaultIgnoreDuplicates    Fault = "ignore-duplicates"     // duplicate detection lets duplicates through
	FaultIgnoreSchedule      Fault = "ignore-schedule"       // scheduled messages are available at once
	FaultShareSessionLocks   Fault = "share-session-locks"   // a session held by one receiver can be accepted by another
)

// AllFaults lists every fault, in the order ProveFailure reports them.
var AllFaults = []Fault{FaultIgnoreLockExpiry, FaultBreakFIFO, FaultIgnoreMessageExpiry,
	FaultIgnoreComplete, FaultDropDeadLetters, FaultTxnAtOnce, FaultIgnoreFilters,
	FaultIgnoreDuplicates, FaultIgnoreSchedule, FaultShareSessionLocks}

// Detection is a scenario's claim that it catches a fault, and where:
// with the fault switched on, the scenario must fail, and its first
// failure must come from the check named Check ([T.Check]) — not from an
// earlier step, a crash or its time budget running out.
type Detection struct {
	Fault Fault
	Check string
}

// Scenario is one observable statement checked against an endpoint.
type Scenario struct {
	Name     string   // short, unique, kebab-case
	Seed     string   // where the statement comes from: "002 PeekLock", "amqp.md §5.1"
	Protocol Protocol //
	// Detects lists the faults this scenario must catch, each with the
	// check that must notice it (see ProveFailure).
	Detects []Detection
	// Slow marks a scenario that takes minutes: it runs only with
	// Options.Slow, and skipping it otherwise is expected, never a failure.
	Slow bool
	// Crashes marks a scenario that kills the endpoint (Target.Crash): it
	// runs after all others, alone, and is skipped, as expected, when the
	// run has no way to crash the endpoint.
	Crashes bool
	// Budget overrides the run's per-scenario time limit when larger.
	Budget time.Duration
	Run    func(t *T)
}

var (
	registryMu sync.Mutex
	registry   = map[string]Scenario{}
)

// register adds scenarios at package init; names must be unique.
func register(ss ...Scenario) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, s := range ss {
		if _, dup := registry[s.Name]; dup {
			panic("conformance: duplicate scenario " + s.Name)
		}
		registry[s.Name] = s
	}
}

// Scenarios returns every registered scenario sorted by name.
func Scenarios() []Scenario {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Scenario, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// T is a scenario's handle on the run: its context, the target, and the
// verdict. Fatalf, Abortf and Skipf end the scenario at once.
type T struct {
	ctx      context.Context
	target   *Target
	name     string
	mu       sync.Mutex
	failed   bool
	skipped  bool
	detail   []string
	cleanups []func()
	slow     bool              // Options.Slow
	check    string            // the check under way (T.Check)
	firstBad string            // the check under way at the first failure
	firstErr bool              // the first failure was an error (Abortf), not an assertion
	panicked bool              // the body panicked (a crash, not a check that failed)
	names    map[string]string // profile → entity created for it
	used     []string          // profiles asked for, in order
	client   *azservicebus.Client
	sender   *azservicebus.Client // against several nodes: the senders' (nodes.go)
}

type stopScenario struct{}

// Context is cancelled when the scenario's time budget ends.
func (t *T) Context() context.Context { return t.ctx }

// Target is the endpoint under test.
func (t *T) Target() *Target { return t.target }

// Slow reports whether scenarios that take minutes may run (--slow).
func (t *T) Slow() bool { return t.slow }

// live stops the scenario in the recording pass, before it touches the
// network: by then it has asked for all its entities.
func (t *T) live() {
	if t.target.recording {
		t.Skipf("recording")
	}
}

// Check names the assertion the scenario makes next, until the next
// Check: a failure is reported under it ("[name] detail"), and
// --prove-failure compares the check of the first failure with the one a
// Detection names.
func (t *T) Check(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.check = name
}

// Errorf records a failed assertion and continues: what the scenario
// observed is not what the statement says.
func (t *T) Errorf(format string, args ...any) {
	t.fail(false, format, args...)
}

// Fatalf records a failed assertion and ends the scenario.
func (t *T) Fatalf(format string, args ...any) {
	t.fail(false, format, args...)
	panic(stopScenario{})
}

// Abortf records an error and ends the scenario: an operation the
// scenario needs failed, or its time ran out, before it could observe
// what it asserts. The scenario fails either way, but --prove-failure
// counts only a failed assertion (Errorf, Fatalf) as the fault noticed.
func (t *T) Abortf(format string, args ...any) {
	t.fail(true, format, args...)
	panic(stopScenario{})
}

func (t *T) fail(isErr bool, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.failed {
		t.firstBad, t.firstErr = t.check, isErr
	}
	t.failed = true
	msg := fmt.Sprintf(format, args...)
	if isErr {
		msg = "error: " + msg
	}
	if t.check != "" {
		msg = "[" + t.check + "] " + msg
	}
	t.detail = append(t.detail, msg)
}

// Skipf ends the scenario as skipped: the endpoint cannot run it.
func (t *T) Skipf(format string, args ...any) {
	t.mu.Lock()
	t.skipped = true
	t.detail = append(t.detail, fmt.Sprintf(format, args...))
	t.mu.Unlock()
	panic(stopScenario{})
}

// Cleanup registers f to run when the scenario ends, last first.
func (t *T) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// must ends the scenario with an error (Abortf) if err is not nil: an
// operation it needs failed.
func (t *T) must(err error, what string, args ...any) {
	if err != nil {
		t.Abortf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// Status is a scenario's verdict.
type Status string

// Verdicts.
const (
	Passed  Status = "pass"
	Failed  Status = "FAIL"
	Skipped Status = "skip"
)

// Result is one scenario's outcome.
type Result struct {
	Name     string        `json:"name"`
	Seed     string        `json:"seed"`
	Protocol Protocol      `json:"protocol"`
	Status   Status        `json:"status"`
	Duration time.Duration `json:"duration_ns"`
	Detail   string        `json:"detail,omitempty"`
	// FailedCheck is the check ([T.Check]) under way at the first failure
	// ("" when the scenario failed before naming one).
	FailedCheck string `json:"failedCheck,omitempty"`
	// FailedByError says the first failure was an error ([T.Abortf]: an
	// operation failed, the time ran out), not a failed assertion.
	FailedByError bool `json:"failedByError,omitempty"`
	// Panicked says the scenario crashed; OverBudget that it ran out of
	// its time budget (a hang, for --prove-failure).
	Panicked   bool `json:"panicked,omitempty"`
	OverBudget bool `json:"overBudget,omitempty"`
	// ExpectedSkip says a skip was declared by the scenario (Slow without
	// Options.Slow, Crashes without Target.Crash) rather than found at
	// run time.
	ExpectedSkip bool `json:"expectedSkip,omitempty"`
}

// runOne executes s with a time budget and returns its result.
func runOne(ctx context.Context, target *Target, s Scenario, budget time.Duration, slow bool) (res Result) {
	res, _ = runScenario(ctx, target, s, budget, slow)
	return res
}

// runScenario executes s and also returns the profiles it asked for.
func runScenario(ctx context.Context, target *Target, s Scenario, budget time.Duration, slow bool) (res Result, used []string) {
	if s.Budget > budget {
		budget = s.Budget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	t := &T{ctx: ctx, target: target, name: s.Name, slow: slow, names: map[string]string{}}
	start := time.Now()
	res = Result{Name: s.Name, Seed: s.Seed, Protocol: s.Protocol}
	if s.Slow && !slow && !target.recording {
		res.Status, res.ExpectedSkip = Skipped, true
		res.Detail = "takes minutes; run with --slow"
		return res, nil
	}
	if s.Crashes && target.Crash == nil && !target.recording {
		res.Status, res.ExpectedSkip = Skipped, true
		res.Detail = "kills the endpoint: give a way to (--crash-command)"
		return res, nil
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stopScenario); !ok {
					t.fail(true, "panic: %v\n%s", r, debug.Stack())
					t.mu.Lock()
					t.panicked = true
					t.mu.Unlock()
				}
			}
		}()
		s.Run(t)
	}()
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			t.cleanups[i]()
		}()
	}
	res.Duration = time.Since(start)
	switch {
	case t.failed:
		res.Status = Failed
	case t.skipped:
		res.Status = Skipped
	default:
		res.Status = Passed
	}
	res.Detail = strings.Join(t.detail, "; ")
	res.FailedCheck, res.FailedByError, res.Panicked = t.firstBad, t.firstErr, t.panicked
	if ctx.Err() != nil && res.Status == Failed {
		res.OverBudget = true
		res.Detail += " (scenario time budget exhausted)"
	}
	return res, t.used
}
