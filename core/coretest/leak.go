package coretest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// MainWithLeakCheck runs a package's tests and then fails the package if
// goroutines whose stacks mention marker (a package path such as
// "omnibus/core.") outlive them: every test closes what it started, and
// Close/Shutdown must leave nothing running (STYLE §7.7). Call it from
// TestMain: os.Exit(coretest.MainWithLeakCheck(m, "omnibus/core.")).
func MainWithLeakCheck(m *testing.M, marker string) int {
	code := m.Run()
	if code == 0 {
		if leaked := goroutinesMatching(marker); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	return code
}

// goroutinesMatching returns the stacks of goroutines running code that
// matches marker, giving ones that are finishing a moment to exit.
func goroutinesMatching(marker string) string {
	var leaked []string
	for range 50 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, marker) && !strings.Contains(g, "goroutinesMatching") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		time.Sleep(20 * time.Millisecond) // real goroutines exit in real time
	}
	return strings.Join(leaked, "\n\n")
}
