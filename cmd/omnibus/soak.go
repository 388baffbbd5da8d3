package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/omnibusmq/omnibus/cmd/omnibus/soak"
)

func init() { subcommands["soak"] = runSoak }

// runSoak is `omnibus soak`: the crash soak (see package soak). The
// broker it kills and restarts is this same executable unless --binary
// names another. SIGINT or SIGTERM cut the soak short; what was done is
// still accounted.
func runSoak(args []string) error {
	var c soak.Config
	fs := soak.NewFlagSet(&c)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if c.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("soak: finding this executable: %w", err)
		}
		c.Binary = self
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := soak.Run(ctx, c, os.Stderr)
	if soak.IsUsage(err) {
		return &exitError{code: 2, err: err}
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
