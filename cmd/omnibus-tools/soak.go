package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/clustersoak"
	"github.com/omnibusmq/omnibus/cmd/omnibus/soak"
)

func init() {
	commands["soak"] = runSoak
	commands["cluster-soak"] = runClusterSoak
}

// runSoak is `omnibus-tools soak`: the crash soak (package soak).
func runSoak(args []string) error {
	var c soak.Config
	return runSoakCommand("soak", soak.NewFlagSet(&c), args, &c.Binary, soak.IsUsage,
		func(ctx context.Context) (soakReport, error) {
			r, err := soak.Run(ctx, c, os.Stderr)
			if r == nil {
				return nil, err
			}
			return r, err
		})
}

// runClusterSoak is `omnibus-tools cluster-soak`: the failover soak of
// three nodes (package clustersoak).
func runClusterSoak(args []string) error {
	var c clustersoak.Config
	return runSoakCommand("cluster-soak", clustersoak.NewFlagSet(&c), args, &c.Binary, clustersoak.IsUsage,
		func(ctx context.Context) (soakReport, error) {
			r, err := clustersoak.Run(ctx, c, os.Stderr)
			if r == nil {
				return nil, err
			}
			return r, err
		})
}

// soakReport is what both soaks hand back: a table of what happened, the
// accounting's verdict, and the removal of what they left on disk.
type soakReport interface {
	WriteTable(w io.Writer) error
	Err() error
	Cleanup() error
}

// runSoakCommand runs a soak against the omnibus binary given by --binary
// (bound to binary), else the one beside this executable or on PATH.
// SIGINT or SIGTERM cut the soak short; what was done is still accounted
// and printed.
func runSoakCommand(name string, fs *flag.FlagSet, args []string, binary *string,
	isUsage func(error) bool, run func(context.Context) (soakReport, error)) error {
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if *binary == "" {
		bin, err := brokerBinary()
		if err != nil {
			return cli.Exit(2, fmt.Errorf("%s: %w", name, err))
		}
		*binary = bin
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := run(ctx)
	if isUsage(err) {
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
