package core_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if goroutines started by the core outlive
// the tests: every broker is closed by its test, and Close must leave
// nothing running (STYLE §7.7).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := coreGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// coreGoroutines returns the stacks of goroutines running core code,
// giving ones that are finishing a moment to exit.
func coreGoroutines() string {
	var leaked []string
	for range 50 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "omnibus/core.") && !strings.Contains(g, "coreGoroutines") {
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
