package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
)

func init() { subcommands["check"] = runCheck }

// runCheck is `omnibus check`: recover a broker on a data directory
// without serving it and compare its memory with the store. It prints one
// line per inconsistency and exits with status 1 if there is any.
func runCheck(args []string) error {
	fs := flag.NewFlagSet("omnibus check", flag.ContinueOnError)
	var o app.Options
	fs.StringVar(&o.DataDir, "data", app.DefaultDataDir, "data directory to check (stop the broker using it first)")
	fs.BoolVar(&o.Repair, "repair", false, "open a data directory whose write-ahead log is damaged, accepting the loss of the records after the damage")
	level := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	o.DiskReserve = -1 // checking writes next to nothing; do not refuse for space
	log, err := newLogger(*level)
	if err != nil {
		return err
	}
	defer log.Sync()
	o.Logger = log
	found, err := app.Check(o)
	if err != nil {
		return err
	}
	for _, f := range found {
		fmt.Fprintln(os.Stdout, f)
	}
	if len(found) > 0 {
		return cli.Exit(1, fmt.Errorf("check: %d inconsistencies in %s", len(found), o.DataDir))
	}
	fmt.Fprintf(os.Stdout, "%s: consistent\n", o.DataDir)
	return nil
}
