package conformance

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"
)

// Options select and pace a run.
type Options struct {
	// Only, when non-nil, keeps scenarios whose name or seed matches.
	Only *regexp.Regexp
	// Parallel is how many scenarios run at once (default 8). Scenarios
	// use their own entities, so they are independent.
	Parallel int
	// Budget is each scenario's time limit (default 2 minutes).
	Budget time.Duration
	// Faults, when set, keeps only scenarios that detect one of them.
	Faults []Fault
	// Slow lets scenarios that need minutes (AutoDeleteOnIdle's 5-minute
	// minimum) run instead of being skipped.
	Slow bool
	// slots, when set, bounds the scenarios running at once across several
	// runs that share it (ProveFailure's, side by side); Parallel is
	// ignored then.
	slots chan struct{}
	// Strict turns every skip a scenario did not declare (Scenario.Slow)
	// into a failure. Set it for an endpoint that has every feature the
	// suite uses, such as an in-process omnibus: there, a skip means a
	// scenario silently stopped testing. Against other endpoints a skip
	// says, with its reason, what the endpoint lacks.
	Strict bool
}

// Run executes the selected scenarios against target.
func Run(ctx context.Context, target *Target, opts Options) (*Report, error) {
	if err := target.open(); err != nil {
		return nil, err
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.Budget <= 0 {
		opts.Budget = 2 * time.Minute
	}
	var selected []Scenario
	for _, s := range Scenarios() {
		if opts.Only != nil && !opts.Only.MatchString(s.Name) && !opts.Only.MatchString(s.Seed) {
			continue
		}
		if len(opts.Faults) > 0 && !detectsAny(s, opts.Faults) {
			continue
		}
		selected = append(selected, s)
	}
	rep := &Report{Endpoint: target.cs.Endpoint, Started: time.Now(), Results: make([]Result, len(selected))}
	locks := newProfileLocks(target.Predeclared)
	sem := opts.slots
	if sem == nil {
		sem = make(chan struct{}, opts.Parallel)
	}
	var wg sync.WaitGroup
	run := func(i int, s Scenario) {
		unlock := locks.lock(ProfilesUsed(s))
		defer unlock()
		res := runOne(ctx, target, s, opts.Budget, opts.Slow)
		if opts.Strict {
			res = failUnexpectedSkip(res)
		}
		rep.Results[i] = res
	}
	var crashing []int
	for i, s := range selected {
		if s.Crashes && target.Crash != nil {
			crashing = append(crashing, i) // after the others, alone
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			run(i, s)
		}()
	}
	wg.Wait()
	for _, i := range crashing {
		run(i, selected[i])
	}
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}

// ProfilesUsed returns the entity profiles scenario s asks for, found by
// running it against a recording target that stops it before any network
// use.
func ProfilesUsed(s Scenario) []string {
	_, used := runScenario(context.Background(), &Target{recording: true}, s, time.Minute, false)
	sort.Strings(used)
	return slices.Compact(used)
}

// profileLocks serialises scenarios sharing a predeclared entity: they
// would drain and receive each other's messages.
type profileLocks struct {
	on bool
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

func newProfileLocks(on bool) *profileLocks {
	return &profileLocks{on: on, m: map[string]*sync.Mutex{}}
}

// lock takes the locks of profiles (sorted, so never deadlocks) and
// returns their release.
func (l *profileLocks) lock(profiles []string) func() {
	if !l.on {
		return func() {}
	}
	var held []*sync.Mutex
	for _, p := range profiles {
		l.mu.Lock()
		m := l.m[p]
		if m == nil {
			m = &sync.Mutex{}
			l.m[p] = m
		}
		l.mu.Unlock()
		m.Lock()
		held = append(held, m)
	}
	return func() {
		for _, m := range held {
			m.Unlock()
		}
	}
}

// failUnexpectedSkip makes a skip the scenario did not declare a failure.
func failUnexpectedSkip(res Result) Result {
	if res.Status == Skipped && !res.ExpectedSkip {
		res.Status = Failed
		res.Detail = "unexpected skip (this endpoint has every feature the suite uses): " + res.Detail
	}
	return res
}

func detectsAny(s Scenario, faults []Fault) bool {
	for _, d := range s.Detects {
		if slices.Contains(faults, d.Fault) {
			return true
		}
	}
	return false
}

// Counts returns how many scenarios passed, failed and were skipped.
func (r *Report) Counts() (passed, failed, skipped int) {
	for _, res := range r.Results {
		switch res.Status {
		case Passed:
			passed++
		case Failed:
			failed++
		default:
			skipped++
		}
	}
	return
}

// Summary is the closing line: "N passed, N failed, N skipped".
func (r *Report) Summary() string {
	p, f, s := r.Counts()
	return fmt.Sprintf("%d passed, %d failed, %d skipped", p, f, s)
}
