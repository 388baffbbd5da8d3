package conformance

import (
	"context"
	"fmt"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"
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

// Faults the suite can prove it detects.
const (
	FaultIgnoreLockExpiry Fault = "ignore-lock-expiry"
	FaultBreakFIFO        Fault = "break-fifo"
)

// Scenario is one observable statement checked against an endpoint.
type Scenario struct {
	Name     string   // short, unique, kebab-case
	Seed     string   // where the statement comes from: "002 PeekLock", "amqp.md §5.1"
	Protocol Protocol //
	// Detects lists the faults this scenario must catch (see ProveFailure).
	Detects []Fault
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
// verdict. Fatalf and Skipf end the scenario at once.
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
	names    map[string]string // profile → entity created for it
	used     []string          // profiles asked for, in order
	client   *azservicebus.Client
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

// Errorf records a failure and continues.
func (t *T) Errorf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	t.detail = append(t.detail, fmt.Sprintf(format, args...))
}

// Fatalf records a failure and ends the scenario.
func (t *T) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic(stopScenario{})
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

// must fails the scenario with what if err is not nil.
func (t *T) must(err error, what string, args ...any) {
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
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
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stopScenario); !ok {
					t.Errorf("panic: %v\n%s", r, debug.Stack())
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
	if ctx.Err() != nil && res.Status == Failed {
		res.Detail += " (scenario time budget exhausted)"
	}
	return res, t.used
}
