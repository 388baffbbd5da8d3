package coretest

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Goroutines counts the process's goroutines, leaving out the idle
// workers of gopool pools (kept on purpose, up to their bound), so that a
// count taken after some work, once it is over, compares with one taken
// before: the difference is what the work left behind.
func Goroutines() int {
	n := 0
	for _, g := range goroutineStacks() {
		if idlePoolWorker(g) {
			continue
		}
		n++
	}
	return n
}

// WaitGoroutines waits, up to 20 s, until [Goroutines] is at most
// baseline, and fails t with the stacks of the goroutines running
// otherwise.
func WaitGoroutines(t testing.TB, baseline int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for Goroutines() > baseline {
		if time.Now().After(deadline) {
			var live []string
			for _, g := range goroutineStacks() {
				if !idlePoolWorker(g) {
					live = append(live, g)
				}
			}
			t.Fatalf("%d goroutines, %d before:\n%s", len(live), baseline, strings.Join(live, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(strings.TrimSpace(string(buf[:n])), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// idlePoolWorker reports whether stack g is a gopool worker waiting for
// its next task.
func idlePoolWorker(g string) bool {
	header, _, _ := strings.Cut(g, "\n")
	return strings.Contains(header, "[chan receive") && strings.Contains(g, "gopool.(*Pool).worker")
}
