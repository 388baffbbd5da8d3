// Package cli holds what omnibus's commands share: flags that environment
// variables can set (OMNIBUS_<NAME>), exit codes carried by errors, and
// the GC tuning the broker and the load generator both run.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// ExitError carries the process's exit status with the error that ends it.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// Exit returns err to end the process with code.
func Exit(code int, err error) error { return &ExitError{Code: code, Err: err} }

// ExitCode is the status err asks for: its ExitError's, else 1.
func ExitCode(err error) int {
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return 1
}

// EnvName is the environment variable that sets a flag: OMNIBUS_ and the
// flag's name in capitals, dashes as underscores.
func EnvName(flagName string) string {
	return "OMNIBUS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ParseWithEnv parses args, then fills every flag not given on the
// command line from its environment variable (EnvName) when that is set.
// Errors are usage errors (exit status 2).
func ParseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return Exit(2, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = Exit(2, fmt.Errorf("%s=%q: %v", env, v, e))
			}
		}
	})
	return err
}
