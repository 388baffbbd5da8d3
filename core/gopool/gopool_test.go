package gopool

import (
	"sync"
	"testing"
	"time"
)

func TestTasksRunAndGoroutinesAreKept(t *testing.T) {
	p := New(2)
	defer p.Close()
	ran := 0
	for range 100 {
		var done sync.WaitGroup
		done.Add(1)
		p.Go(func() {
			defer done.Done()
			ran++
		})
		done.Wait()
		waitIdle(t, p, 1) // the goroutine is back in the pool before the next task
	}
	if ran != 100 {
		t.Errorf("ran %d tasks, want 100", ran)
	}
	if n := p.spawned.Load(); n != 1 {
		t.Errorf("100 tasks one after another started %d goroutines, want 1", n)
	}
}

func TestTasksMayWaitForEachOther(t *testing.T) {
	p := New(1)
	defer p.Close()
	release := make(chan struct{})
	var done sync.WaitGroup
	for range 10 {
		done.Add(1)
		p.Go(func() {
			defer done.Done()
			<-release
		})
	}
	close(release) // ten tasks were running at once: none waited for a free goroutine
	done.Wait()
	waitIdle(t, p, 1) // at most maxIdle of the ten stay
}

func TestCloseEndsIdleGoroutines(t *testing.T) {
	p := New(4)
	var done sync.WaitGroup
	done.Add(1)
	p.Go(done.Done)
	done.Wait()
	waitIdle(t, p, 1)
	p.Close()
	waitIdle(t, p, 0)
	done.Add(1)
	p.Go(done.Done) // still runs after Close
	done.Wait()
	p.Close() // twice is fine
}

// waitIdle waits until n goroutines are idle: a goroutine counts itself
// idle just after its task returns, so the count can lag the task, by as
// long as the scheduler keeps that goroutine off a CPU. The wait is
// bounded by time, not by a number of polls: under load a goroutine can
// stay unscheduled for many polls.
func waitIdle(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for pause := time.Microsecond; ; pause = min(2*pause, time.Millisecond) {
		if p.Idle() == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle goroutines: %d, want %d after 30s", p.Idle(), n)
		}
		time.Sleep(pause)
	}
}
