package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

func init() { subcommands["bench"] = runBench }

// runBench is `omnibus bench`: the load generator (see package bench).
// SIGINT or SIGTERM stops sending early; the run is still reported.
func runBench(args []string) error {
	var c bench.Config
	if err := parseWithEnv(bench.NewFlagSet(&c), args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := bench.Main(ctx, c, os.Stdout, os.Stderr)
	if bench.IsUsage(err) {
		return &exitError{code: 2, err: err}
	}
	return err
}
