// Command omnibus-tools holds what tests and measures omnibus and is kept
// out of the broker's binary, so that the broker links neither the Azure
// SDK nor the load generator:
//
//	omnibus-tools conformance [flags]    run the conformance suite (against any endpoint, or an in-process omnibus)
//	omnibus-tools bench [flags]          run the load generator
//	omnibus-tools soak [flags]           kill the broker under load and account for every message
//	omnibus-tools cluster-soak [flags]   fail over a three-node cluster under load, the same accounting
//
// The soaks start the omnibus binary given by --binary, else the one
// beside this executable (make build puts both in bin/), else omnibus on
// PATH. Every flag can also be set by an environment variable
// OMNIBUS_<NAME> (dashes as underscores).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
)

// commands register themselves here, each in its own file.
var commands = map[string]func(args []string) error{}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		names := make([]string, 0, len(commands))
		for name := range commands {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: omnibus-tools %s [flags]   (each with -h)\n", strings.Join(names, "|"))
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "omnibus-tools:", err)
		os.Exit(cli.ExitCode(err))
	}
}

// brokerBinary finds the omnibus binary the soaks run: beside this
// executable, else on PATH.
func brokerBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "omnibus")
		if st, err := os.Stat(beside); err == nil && !st.IsDir() {
			return beside, nil
		}
	}
	if p, err := exec.LookPath("omnibus"); err == nil {
		return p, nil
	}
	return "", errors.New("no omnibus binary beside this one or on PATH: give --binary (make build puts it in bin/omnibus)")
}
