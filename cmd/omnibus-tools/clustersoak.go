package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/clustersoak"
)

func init() { commands["cluster-soak"] = runClusterSoak }

// runClusterSoak is `omnibus-tools cluster-soak`: the failover soak
// (package clustersoak) of three nodes running the omnibus binary
// (--binary, else the one beside this executable or on PATH). SIGINT or SIGTERM cut it short; what was done is still
// accounted.
func runClusterSoak(args []string) error {
	var c clustersoak.Config
	fs := clustersoak.NewFlagSet(&c)
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if c.Binary == "" {
		bin, err := brokerBinary()
		if err != nil {
			return cli.Exit(2, fmt.Errorf("cluster-soak: %w", err))
		}
		c.Binary = bin
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := clustersoak.Run(ctx, c, os.Stderr)
	if clustersoak.IsUsage(err) {
		return cli.Exit(2, err)
	}
	if r != nil {
		if werr := r.WriteTable(os.Stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	if err := r.Err(); err != nil {
		return err
	}
	return r.Cleanup()
}
