// Command compare is the Go half of compare.sh (make compare): the small
// jobs a shell script does badly.
//
//	compare ports N               print N free TCP ports on 127.0.0.1
//	compare waitopen URL TIMEOUT  wait until an AMQP open on URL succeeds
//	                              (SASL PLAIN from $AMQP_USER/$AMQP_PASS);
//	                              print the Unix time in nanoseconds it did
//	compare table DIR             print the markdown table of the bench
//	                              results (*.json) in DIR
//
// Result files are named SCENARIO__TARGET__REP.json; see [loadRuns].
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: compare ports N | waitopen URL TIMEOUT | table DIR")
	}
	switch args[0] {
	case "ports":
		if len(args) != 2 {
			return fmt.Errorf("usage: compare ports N")
		}
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 {
			return fmt.Errorf("ports: bad count %q", args[1])
		}
		ports, err := freePorts(n)
		if err != nil {
			return err
		}
		for _, p := range ports {
			fmt.Println(p)
		}
		return nil
	case "waitopen":
		if len(args) != 3 {
			return fmt.Errorf("usage: compare waitopen URL TIMEOUT")
		}
		d, err := time.ParseDuration(args[2])
		if err != nil {
			return fmt.Errorf("waitopen: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		at, err := waitOpen(ctx, args[1], os.Getenv("AMQP_USER"), os.Getenv("AMQP_PASS"))
		if err != nil {
			return err
		}
		fmt.Println(at.UnixNano())
		return nil
	case "table":
		if len(args) != 2 {
			return fmt.Errorf("usage: compare table DIR")
		}
		runs, err := loadRuns(args[1])
		if err != nil {
			return err
		}
		return writeTable(os.Stdout, runs)
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
}
