package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// A Proof is what ProveFailure found for one fault: the report of the
// scenarios that claim to detect it, run against an endpoint with only
// that fault on, and the verdict on each.
type Proof struct {
	Fault    Fault
	Report   *Report
	Verdicts []Verdict
}

// Verdict says whether one scenario proved it detects a fault.
type Verdict struct {
	Scenario string
	Check    string // the check that must notice the fault
	Proved   bool
	Why      string // what happened instead, when not proved
}

// ProveFailure shows that the suite can fail where it claims to: for
// each fault, start returns an endpoint with that fault (and no other)
// switched on, and every scenario whose Detects names the fault runs
// against it. The faults run side by side, each on its own endpoint, with
// at most opts.Parallel scenarios running at once across all of them. A scenario proves its claim only if it fails, and its
// first failure is a failed assertion ([T.Fatalf], [T.Errorf]) of the
// check its Detection names: passing, skipping, failing at another check,
// failing with an error ([T.Abortf]: an operation that failed, a receive
// that ran out of time budget), crashing or running out of its time budget
// all disprove it. opts.Faults is replaced; opts.Only still
// narrows the selection.
func ProveFailure(ctx context.Context, faults []Fault, start func(Fault) (*Target, func(), error), opts Options) ([]*Proof, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	opts.slots = make(chan struct{}, opts.Parallel)
	byName := map[string]Scenario{}
	for _, s := range Scenarios() {
		byName[s.Name] = s
	}
	proofs := make([]*Proof, len(faults))
	errs := make([]error, len(faults))
	var wg sync.WaitGroup
	for i, f := range faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proofs[i], errs[i] = proveOne(ctx, f, start, opts, byName)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return proofs, nil
}

// proveOne runs the scenarios claiming fault f against an endpoint with f
// on, and judges each claim.
func proveOne(ctx context.Context, f Fault, start func(Fault) (*Target, func(), error), opts Options, byName map[string]Scenario) (*Proof, error) {
	target, stop, err := start(f)
	if err != nil {
		return nil, fmt.Errorf("prove-failure: starting an endpoint with %s: %w", f, err)
	}
	defer stop()
	opts.Faults = []Fault{f}
	rep, err := Run(ctx, target, opts)
	if err != nil {
		return nil, err
	}
	p := &Proof{Fault: f, Report: rep}
	for _, res := range rep.Results {
		d, _ := detection(byName[res.Name], f)
		v := Verdict{Scenario: res.Name, Check: d.Check}
		v.Proved, v.Why = judge(d, res)
		p.Verdicts = append(p.Verdicts, v)
	}
	return p, nil
}

// detection returns s's claim about fault f.
func detection(s Scenario, f Fault) (Detection, bool) {
	for _, d := range s.Detects {
		if d.Fault == f {
			return d, true
		}
	}
	return Detection{}, false
}

// judge tells whether res, a run of a scenario with d's fault on, proves
// the scenario detects it.
func judge(d Detection, res Result) (bool, string) {
	switch {
	case res.Status == Passed:
		return false, "passed: the fault went unnoticed"
	case res.Status == Skipped:
		return false, "skipped: " + res.Detail
	case res.Panicked:
		return false, "crashed: " + res.Detail
	case res.OverBudget:
		return false, "hung: ran out of its time budget: " + res.Detail
	case res.FailedCheck != d.Check:
		return false, fmt.Sprintf("failed at check %q, not %q: %s", res.FailedCheck, d.Check, res.Detail)
	case res.FailedByError:
		return false, "failed with an error, not the assertion: " + res.Detail
	}
	return true, ""
}

// Unproved counts the verdicts that did not prove their claim.
func Unproved(proofs []*Proof) (unproved, total int) {
	for _, p := range proofs {
		for _, v := range p.Verdicts {
			total++
			if !v.Proved {
				unproved++
			}
		}
	}
	return unproved, total
}

// WriteProofs prints, per fault, each claiming scenario with the check
// that must notice it, the check that did, and the verdict.
func WriteProofs(w io.Writer, proofs []*Proof) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tSCENARIO\tMUST FAIL AT\tFAILED AT\tTIME\tVERDICT")
	for _, p := range proofs {
		res := map[string]Result{}
		for _, r := range p.Report.Results {
			res[r.Name] = r
		}
		for _, v := range p.Verdicts {
			r := res[v.Scenario]
			at := r.FailedCheck
			switch {
			case r.Status != Failed:
				at = "(" + string(r.Status) + ")"
			case r.FailedByError:
				at += " (error)"
			}
			verdict := "proved"
			if !v.Proved {
				verdict = "NOT PROVED: " + oneLine(v.Why, 200)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Fault, v.Scenario, v.Check, at, r.Duration.Round(time.Millisecond), verdict)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	unproved, total := Unproved(proofs)
	var names []string
	for _, p := range proofs {
		names = append(names, fmt.Sprintf("%s: %d", p.Fault, len(p.Verdicts)))
	}
	_, err := fmt.Fprintf(w, "\n%d of %d claims proved (%s)\n", total-unproved, total, strings.Join(names, ", "))
	return err
}
