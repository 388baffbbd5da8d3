package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time by `make dist` and `make image`
// (-ldflags "-X main.version=… -X main.commit=…"); a plain go build
// reads the commit from the build's VCS stamp instead.
var (
	version = "dev"
	commit  = ""
)

// printVersion is `omnibus --version`: the version, the commit it was
// built from and the Go that built it.
func printVersion(w io.Writer) {
	c, modified := commit, false
	if info, ok := debug.ReadBuildInfo(); ok && c == "" {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				c = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	if modified {
		c += " (modified)"
	}
	fmt.Fprintf(w, "omnibus %s\ncommit %s\n%s %s/%s\n", version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
