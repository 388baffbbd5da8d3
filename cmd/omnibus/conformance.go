package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/conformance"
	"github.com/omnibusmq/omnibus/core"
)

func init() { subcommands["conformance"] = runConformance }

// runConformance runs the conformance suite against an endpoint, or
// against an in-process omnibus when no connection string is given.
func runConformance(args []string) error {
	fs := flag.NewFlagSet("omnibus conformance", flag.ContinueOnError)
	cs := fs.String("connection-string", "", "endpoint to test (default: start an in-process omnibus on loopback)")
	httpBase := fs.String("http", "", "base URL of the REST/ATOM endpoint, e.g. http://localhost:5300")
	only := fs.String("only", "", "run only scenarios whose name or seed matches this regular expression")
	format := fs.String("format", "text", "output format: text, markdown or json")
	out := fs.String("out", "", "also write the report to this file")
	parallel := fs.Int("parallel", 8, "scenarios run at once")
	predeclared := fs.Bool("predeclared", false, "use the entities of conformance/Config.json instead of creating them")
	insecure := fs.Bool("insecure", false, "accept any TLS certificate on the HTTP endpoint")
	cross := fs.Bool("cross-protocol", false, "the endpoint shares lock tokens between AMQP and REST (implied for in-process omnibus)")
	prove := fs.Bool("prove-failure", false, "run against a deliberately broken in-process omnibus and require the matching scenarios to fail")
	slow := fs.Bool("slow", false, "also run scenarios that take minutes (AutoDeleteOnIdle deletion)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	opts := conformance.Options{Parallel: *parallel, Slow: *slow}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--only: %v", err)}
		}
		opts.Only = re
	}
	target := &conformance.Target{ConnectionString: *cs, HTTP: *httpBase, Predeclared: *predeclared,
		InsecureTLS: *insecure, CrossProtocolLocks: *cross}
	if *prove {
		return proveFailure(target, opts, conformance.Format(*format))
	}
	if target.ConnectionString == "" {
		a, err := startInProcess(core.Faults{})
		if err != nil {
			return err
		}
		defer a.Shutdown(context.Background())
		target.ConnectionString = a.ConnectionString()
		target.HTTP = "http://" + a.HTTPAddr().String()
		target.CrossProtocolLocks = true
	}
	rep, err := conformance.Run(context.Background(), target, opts)
	if err != nil {
		return err
	}
	if err := writeReport(rep, conformance.Format(*format), *out); err != nil {
		return err
	}
	if _, failed, _ := rep.Counts(); failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("conformance: %s", rep.Summary())}
	}
	return nil
}

// startInProcess starts an in-memory omnibus on loopback ports.
func startInProcess(faults core.Faults) (*app.App, error) {
	return app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", Faults: faults})
}

// proveFailure shows the suite can fail: against omnibus with faults
// injected, every scenario that claims to detect one of them must fail.
func proveFailure(target *conformance.Target, opts conformance.Options, format conformance.Format) error {
	faults := []conformance.Fault{conformance.FaultIgnoreLockExpiry, conformance.FaultBreakFIFO}
	a, err := startInProcess(core.Faults{IgnoreLockExpiry: true, BreakFIFO: true})
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background())
	target.ConnectionString = a.ConnectionString()
	target.HTTP = "http://" + a.HTTPAddr().String()
	target.CrossProtocolLocks = true
	opts.Faults = faults
	rep, err := conformance.Run(context.Background(), target, opts)
	if err != nil {
		return err
	}
	fmt.Printf("Fault-injected omnibus (%s): these scenarios must FAIL.\n\n", faultNames(faults))
	if err := rep.Write(os.Stdout, format); err != nil {
		return err
	}
	passed, failed, skipped := rep.Counts()
	if failed == 0 || passed+skipped > 0 {
		return &exitError{code: 1, err: fmt.Errorf("prove-failure: %d of %d fault-detecting scenarios did not fail", passed+skipped, len(rep.Results))}
	}
	fmt.Printf("prove-failure: all %d fault-detecting scenarios failed as they must\n", failed)
	return nil
}

func faultNames(fs []conformance.Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

func writeReport(rep *conformance.Report, format conformance.Format, out string) error {
	if err := rep.Write(os.Stdout, format); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	werr := rep.Write(f, format)
	return errors.Join(werr, f.Close())
}
