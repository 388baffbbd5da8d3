package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/soak"
)

func init() { commands["soak"] = runSoak }

// runSoak is `omnibus-tools soak`: the crash soak (see package soak). The
// broker it kills and restarts is --binary, else the omnibus beside this
// executable or on PATH. SIGINT or SIGTERM cut the soak short; what was done is
// still accounted.
func runSoak(args []string) error {
	var c soak.Config
	fs := soak.NewFlagSet(&c)
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if c.Binary == "" {
		bin, err := brokerBinary()
		if err != nil {
			return cli.Exit(2, fmt.Errorf("soak: %w", err))
		}
		c.Binary = bin
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := soak.Run(ctx, c, os.Stderr)
	if soak.IsUsage(err) {
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
