// Package membudgettest helps the fronts' tests watch a memory budget.
package membudgettest

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core/membudget"
)

// WaitUsed waits up to 10 s until b holds want bytes, and fails the test
// if it does not. A front gives back what it held a moment after the
// client has its answer (a handler when it returns, a connection after
// its socket closed), so a test cannot read Used right away.
func WaitUsed(t testing.TB, b *membudget.Budget, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.Used() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the memory budget holds %d bytes, want %d", b.Used(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SamplePeak watches b from a goroutine of its own, reading Used as often
// as the scheduler lets it, until the function it returns is called (or
// the test ends); that function returns the most b held meanwhile.
func SamplePeak(t testing.TB, b *membudget.Budget) (stop func() int64) {
	var peak int64 // written by the sampler only, read after it ended
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if u := b.Used(); u > peak {
				peak = u
			}
			select {
			case <-quit:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	stop = sync.OnceValue(func() int64 {
		close(quit)
		<-done
		return peak
	})
	t.Cleanup(func() { stop() })
	return stop
}
