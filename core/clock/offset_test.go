package clock

import (
	"errors"
	"testing"
	"time"
)

func TestOffsetAdvanceRunsDueTimersAndRearmsTheRest(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := NewFake(start)
	c := NewOffset(base, time.Hour)
	if got := c.Now().Sub(start); got != time.Hour {
		t.Fatalf("Now is %v ahead of the base, want 1h", got)
	}
	var got []string
	rec := func(name string) func() { return func() { got = append(got, name) } }
	c.AfterFunc(3*time.Minute, rec("3m"))
	c.AfterFunc(time.Minute, rec("1m"))
	stopped := c.AfterFunc(2*time.Minute, rec("stopped"))
	c.AfterFunc(10*time.Minute, rec("10m"))
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}

	if err := c.Advance(5 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1m", "3m"}; !equalStrings(got, want) {
		t.Fatalf("Advance(5m) ran %v, want %v", got, want)
	}
	if n := c.Pending(); n != 1 {
		t.Fatalf("%d timers pending after the advance, want 1 (10m)", n)
	}

	// The 10-minute timer is now due 5 minutes of base time later, not 10.
	base.Advance(4 * time.Minute)
	if len(got) != 2 {
		t.Fatalf("ran %v after 4 more minutes, want nothing new", got)
	}
	base.Advance(time.Minute)
	if want := []string{"1m", "3m", "10m"}; !equalStrings(got, want) {
		t.Fatalf("ran %v once the re-armed timer was due, want %v", got, want)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d timers pending, want 0", n)
	}
}

func TestOffsetRefusesBackwards(t *testing.T) {
	base := NewFake(time.Unix(0, 0))
	c := NewOffset(base, time.Minute)
	if err := c.Advance(-time.Second); !errors.Is(err, ErrBackwards) {
		t.Fatalf("Advance(-1s) = %v, want ErrBackwards", err)
	}
	if c.Ahead() != time.Minute {
		t.Fatalf("a refused advance moved the clock: %v ahead", c.Ahead())
	}
}

func TestOffsetTimerRunsOnItsBaseClock(t *testing.T) {
	base := NewFake(time.Unix(0, 0))
	c := NewOffset(base, 0)
	ran := false
	c.AfterFunc(time.Second, func() { ran = true })
	base.Advance(time.Second)
	if !ran {
		t.Fatal("timer did not run when its base clock reached it")
	}
	if c.Pending() != 0 {
		t.Fatal("a timer that ran is still pending")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
