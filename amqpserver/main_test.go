package amqpserver

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if goroutines of the server outlive the
// tests: every test shuts its server down, and Shutdown must leave no
// connection, reader, writer or helper goroutine behind (STYLE §7.7).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := serverGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// serverGoroutines returns the stacks of goroutines running server code,
// giving ones that are finishing a moment to exit.
func serverGoroutines() string {
	var leaked []string
	for range 50 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "omnibus/amqpserver.(") && !strings.Contains(g, "serverGoroutines") {
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
