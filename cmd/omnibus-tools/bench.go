package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

func init() { commands["bench"] = runBench }

// runBench is `omnibus-tools bench`: the load generator (see package bench).
// SIGINT or SIGTERM stops sending early; the run is still reported.
func runBench(args []string) error {
	var c bench.Config
	fs := bench.NewFlagSet(&c)
	cpuProfile := fs.String("cpuprofile", "", "write the bench tool's own CPU profile to this file")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	defer cli.StartGCTuning()()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := bench.Main(ctx, c, os.Stdout, os.Stderr)
	if bench.IsUsage(err) {
		return cli.Exit(2, err)
	}
	return err
}
