package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/conformance"
	"github.com/omnibusmq/omnibus/core"
)

func init() { commands["conformance"] = runConformance }

// runConformance runs the conformance suite against an endpoint, or
// against an in-process omnibus when no connection string is given.
func runConformance(args []string) error {
	fs := flag.NewFlagSet("omnibus-tools conformance", flag.ContinueOnError)
	cs := fs.String("connection-string", "", "endpoint to test (default: start an in-process omnibus on loopback)")
	httpBase := fs.String("http", "", "base URL of the REST/ATOM endpoint, e.g. http://localhost:5300")
	second := fs.String("second-connection-string", "", "a connection string of another namespace of the same service (the namespace scenario; omnibus makes one itself)")
	only := fs.String("only", "", "run only scenarios whose name or seed matches this regular expression")
	format := fs.String("format", "text", "output format: text, markdown or json")
	out := fs.String("out", "", "also write the report to this file")
	parallel := fs.Int("parallel", 8, "scenarios run at once (--prove-failure: 16 by default, across all its faults)")
	predeclared := fs.Bool("predeclared", false, "use the entities of conformance/Config.json instead of creating them")
	insecure := fs.Bool("insecure", false, "accept any TLS certificate (HTTPS, AMQPS, WebSockets)")
	amqps := fs.String("amqps", "", "host:port of AMQP over TLS (default: for an ordinary connection string, its host on 5671)")
	webSocket := fs.String("websocket", "", "URL of AMQP over WebSockets (default: for an ordinary connection string, wss://<host>/$servicebus/websocket)")
	caFile := fs.String("ca-file", "", "PEM file of certificates to trust besides the system's, for AMQPS and WebSockets (omnibus cert prints omnibus's)")
	cross := fs.Bool("cross-protocol", false, "the endpoint shares lock tokens between AMQP and REST (implied for in-process omnibus)")
	fault := fs.String("fault", "", "run against an in-process omnibus (or --cluster) with this one fault on (a --prove-failure fault), to see which scenarios it breaks")
	prove := fs.Bool("prove-failure", false, "inject one fault at a time into an in-process omnibus: every scenario claiming that fault must fail at its named check")
	slow := fs.Bool("slow", false, "also run scenarios that take minutes (AutoDeleteOnIdle deletion, a transaction timeout over a minute)")
	crashCommand := fs.String("crash-command", "", "shell command that kills the endpoint with SIGKILL and starts it again on the same addresses and data\n(lets the crash scenarios run; they run last, alone)")
	var maxEntity cli.ByteSize
	fs.Var(&maxEntity, "max-entity-size", "the endpoint's cap on what one queue or topic stores (omnibus --max-entity-size); the quota scenarios need one of at most 16MiB (an in-process omnibus runs with "+cli.FormatSize(inProcessMaxEntity)+")")
	clusterNodes := fs.Int("cluster", 0, "start an in-process cluster of this many nodes (peer TLS as cluster init and join tokens make it) instead of one omnibus;\nclients use every node; without --only, every scenario but those a cluster run excludes (conformance/README.md)")
	groups := fs.Int("groups", 0, "with --cluster: the cluster's data groups (omnibus --groups)")
	txnTimeout := fs.Duration("txn-timeout", core.DefaultTxnTimeout, "the endpoint's transaction timeout (an in-process omnibus runs with "+inProcessTxnTimeout.String()+")")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	opts := conformance.Options{Parallel: *parallel, Slow: *slow}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return cli.Exit(2, fmt.Errorf("--only: %v", err))
		}
		opts.Only = re
	}
	target := &conformance.Target{ConnectionString: *cs, SecondConnectionString: *second, HTTP: *httpBase, Predeclared: *predeclared,
		InsecureTLS: *insecure, CrossProtocolLocks: *cross, AMQPS: *amqps, WebSocket: *webSocket, CAFile: *caFile,
		TxnTimeout: *txnTimeout, MaxEntityBytes: max(int64(maxEntity), 0)}
	if *crashCommand != "" {
		target.Crash = func(ctx context.Context) error { return crashEndpoint(ctx, *crashCommand, target) }
	}
	if *clusterNodes > 0 {
		if target.ConnectionString != "" || *prove {
			return cli.Exit(2, errors.New("--cluster starts its own omnibus cluster: give neither --connection-string nor --prove-failure"))
		}
		if opts.Only == nil {
			opts.Only = clusterOnly()
		}
		var faults core.Faults
		if *fault != "" {
			// Every node's core with the fault on: the scenarios that
			// claim it must fail through the cluster too.
			f, err := coreFaults(conformance.Fault(*fault))
			if err != nil {
				return cli.Exit(2, err)
			}
			faults = f
		}
		ct, stop, err := startCluster(*clusterNodes, *groups, faults)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(os.Stderr, "conformance: an in-process cluster of %d nodes with %d data groups; scenarios send through one node and receive through another\n", *clusterNodes, *groups)
		target = ct
		// The cluster has every feature the scenarios it runs use.
		opts.Strict = true
	}
	if *fault != "" && *clusterNodes == 0 {
		if target.ConnectionString != "" || *prove {
			return cli.Exit(2, errors.New("--fault starts its own fault-injected omnibus: give neither --connection-string nor --prove-failure"))
		}
		return runWithFault(conformance.Fault(*fault), opts, conformance.Format(*format), *out)
	}
	if *prove {
		if target.ConnectionString != "" {
			return cli.Exit(2, errors.New("--prove-failure starts its own fault-injected omnibus: give no --connection-string"))
		}
		if !flagGiven(fs, "parallel") {
			// The faults' runs go side by side and mostly wait (for locks
			// to lapse, for what must not arrive): twice the slots keep
			// the whole proof about as long as its slowest scenario.
			opts.Parallel = 16
		}
		return proveFailure(opts, conformance.Format(*format))
	}
	if target.ConnectionString == "" {
		tlsDir, err := os.MkdirTemp("", "omnibus-conformance-tls")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tlsDir)
		a, err := app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			AMQPSAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", TLSDir: tlsDir, TxnTimeout: inProcessTxnTimeout,
			Limits: core.Limits{MaxEntityBytes: inProcessMaxEntity}})
		if err != nil {
			return err
		}
		defer a.Shutdown(context.Background())
		target.ConnectionString = a.ConnectionString()
		target.HTTP = "http://" + a.HTTPAddr().String()
		target.CrossProtocolLocks = true
		target.TxnTimeout = inProcessTxnTimeout
		target.MaxEntityBytes = inProcessMaxEntity
		// Every transport: AMQPS, and WebSockets over HTTPS, trusting the
		// in-process omnibus's local CA.
		target.AMQPS = a.AMQPSAddr().String()
		target.WebSocket = "wss://" + a.HTTPSAddr().String() + "/$servicebus/websocket"
		target.CAFile = a.CAPath
		// An in-process omnibus has every feature the suite uses: a skip
		// there means a scenario silently stopped testing.
		opts.Strict = true
	}
	rep, err := conformance.Run(context.Background(), target, opts)
	if err != nil {
		return err
	}
	if err := writeReport(rep, conformance.Format(*format), *out); err != nil {
		return err
	}
	if _, failed, _ := rep.Counts(); failed > 0 {
		return cli.Exit(1, fmt.Errorf("conformance: %s", rep.Summary()))
	}
	return nil
}

// flagGiven reports whether the command line (or the environment) set
// the flag called name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// inProcessTxnTimeout is the transaction timeout of the in-process
// omnibus, short so that the timeout scenario runs in seconds.
const inProcessTxnTimeout = 3 * time.Second

// inProcessMaxEntity caps what one entity of the in-process omnibus
// stores (--max-entity-size), so that the quota scenarios fill a queue in
// moments; no other scenario stores as much in one entity.
const inProcessMaxEntity = 8 << 20

// startInProcess starts an in-memory omnibus on loopback ports.
func startInProcess(faults core.Faults) (*app.App, error) {
	return app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-", Faults: faults,
		Limits: core.Limits{MaxEntityBytes: inProcessMaxEntity}})
}

// proveFailure shows the suite can fail where it claims to: one fault at
// a time, an in-process omnibus with only that fault runs every scenario
// that claims to detect it, and each must fail at the check it names.
func proveFailure(opts conformance.Options, format conformance.Format) error {
	opts.Strict = true
	start := func(f conformance.Fault) (*conformance.Target, func(), error) {
		faults, err := coreFaults(f)
		if err != nil {
			return nil, nil, err
		}
		a, err := startInProcess(faults)
		if err != nil {
			return nil, nil, err
		}
		target := &conformance.Target{ConnectionString: a.ConnectionString(), HTTP: "http://" + a.HTTPAddr().String(),
			CrossProtocolLocks: true, MaxEntityBytes: inProcessMaxEntity}
		return target, func() { _ = a.Shutdown(context.Background()) }, nil
	}
	proofs, err := conformance.ProveFailure(context.Background(), conformance.AllFaults, start, opts)
	if err != nil {
		return err
	}
	for _, p := range proofs {
		fmt.Printf("== omnibus with %s: these scenarios must fail, each at its named check\n\n", p.Fault)
		if err := p.Report.Write(os.Stdout, format); err != nil {
			return err
		}
		fmt.Println()
	}
	if err := conformance.WriteProofs(os.Stdout, proofs); err != nil {
		return err
	}
	if unproved, total := conformance.Unproved(proofs); unproved > 0 || total == 0 {
		return cli.Exit(1, fmt.Errorf("prove-failure: %d of %d claims not proved", unproved, total))
	}
	return nil
}

// runWithFault runs the scenarios against an in-process omnibus with
// fault f on: those that fail are the ones f breaks.
func runWithFault(f conformance.Fault, opts conformance.Options, format conformance.Format, out string) error {
	faults, err := coreFaults(f)
	if err != nil {
		return cli.Exit(2, err)
	}
	a, err := startInProcess(faults)
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background())
	target := &conformance.Target{ConnectionString: a.ConnectionString(), HTTP: "http://" + a.HTTPAddr().String(),
		CrossProtocolLocks: true}
	rep, err := conformance.Run(context.Background(), target, opts)
	if err != nil {
		return err
	}
	if err := writeReport(rep, format, out); err != nil {
		return err
	}
	if _, failed, _ := rep.Counts(); failed > 0 {
		return cli.Exit(1, fmt.Errorf("conformance with %s: %s", f, rep.Summary()))
	}
	return nil
}

// coreFaults is the core switch that injects fault f.
func coreFaults(f conformance.Fault) (core.Faults, error) {
	switch f {
	case conformance.FaultIgnoreLockExpiry:
		return core.Faults{IgnoreLockExpiry: true}, nil
	case conformance.FaultBreakFIFO:
		return core.Faults{BreakFIFO: true}, nil
	case conformance.FaultIgnoreMessageExpiry:
		return core.Faults{IgnoreMessageExpiry: true}, nil
	case conformance.FaultIgnoreComplete:
		return core.Faults{IgnoreComplete: true}, nil
	case conformance.FaultDropDeadLetters:
		return core.Faults{DropDeadLetters: true}, nil
	case conformance.FaultTxnAtOnce:
		return core.Faults{TxnAtOnce: true}, nil
	case conformance.FaultIgnoreFilters:
		return core.Faults{IgnoreFilters: true}, nil
	case conformance.FaultIgnoreDuplicates:
		return core.Faults{IgnoreDuplicates: true}, nil
	case conformance.FaultIgnoreSchedule:
		return core.Faults{IgnoreSchedule: true}, nil
	case conformance.FaultShareSessionLocks:
		return core.Faults{ShareSessionLocks: true}, nil
	}
	return core.Faults{}, fmt.Errorf("no core switch for fault %q", f)
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

// crashEndpoint runs the --crash-command and waits until the endpoint
// accepts connections again.
func crashEndpoint(ctx context.Context, command string, target *conformance.Target) error {
	if out, err := exec.CommandContext(ctx, "sh", "-c", command).CombinedOutput(); err != nil {
		return fmt.Errorf("--crash-command: %v\n%s", err, out)
	}
	addr := target.AMQPS
	if addr == "" {
		addr = target.AMQPHost()
	}
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the endpoint did not come back after --crash-command: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
