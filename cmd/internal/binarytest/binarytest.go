// Package binarytest helps tests that run the omnibus binary as a
// process: the broker's own tests and the soaks.
package binarytest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build compiles cmd/omnibus into the test's temporary directory and
// returns the binary's path. Go's build cache makes every build after the
// first a link.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "omnibus")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/omnibusmq/omnibus/cmd/omnibus").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// LogWriter sends what is written to it to the test's log, one call a
// line: for a soak's progress lines.
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
