// Command omnibus runs an Azure Service Bus-compatible broker: AMQP 1.0 on
// :5672 for the official SDKs, the REST API and ATOM management on :5300
// (and HTTPS on :5443), with messages stored durably in Pebble.
//
//	omnibus [flags]                 run the broker (see -h)
//	omnibus --version               print the version, commit and Go version
//	omnibus token | cert            a REST token; the local CA's path
//	omnibus check --data DIR        compare a data directory's recovered state with its store
//	omnibus cluster ...             a replicated cluster's CA, tokens, members and status
//	omnibus backup | restore        a running node's backup (over its admin socket); a data directory from one
//
// The conformance suite, the load generator and the soaks are in
// omnibus-tools (cmd/omnibus-tools), so that this binary links none of
// the SDKs they drive.
//
// Every flag can also be set by an environment variable OMNIBUS_<NAME>
// (dashes as underscores), e.g. OMNIBUS_DATA=/var/lib/omnibus.
package main

import (
	"fmt"
	"os"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
)

func main() {
	args := os.Args[1:]
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		printVersion(os.Stdout)
		return
	}
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve", "run":
		err = serve(args)
	default:
		if sub, ok := subcommands[cmd]; ok {
			err = sub(args)
			break
		}
		fmt.Fprintf(os.Stderr, "omnibus: unknown command %q (want serve%s)\n", cmd, subcommandNames())
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "omnibus:", err)
		os.Exit(cli.ExitCode(err))
	}
}

// subcommands other than serve register themselves here (conformance,
// bench), each in its own file.
var subcommands = map[string]func(args []string) error{}

func subcommandNames() string {
	s := ""
	for name := range subcommands {
		s += ", " + name
	}
	return s
}
