package clock

import (
	"testing"
	"time"
)

func TestFakeAdvanceRunsDueTimersInOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var got []string
	var at []time.Duration
	rec := func(name string) func() {
		return func() { got = append(got, name); at = append(at, c.Now().Sub(start)) }
	}
	c.AfterFunc(3*time.Second, rec("c"))
	c.AfterFunc(time.Second, rec("a"))
	stopped := c.AfterFunc(2*time.Second, rec("stopped"))
	c.AfterFunc(10*time.Second, rec("later"))
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	c.AfterFunc(2*time.Second, func() {
		got = append(got, "b")
		c.AfterFunc(500*time.Millisecond, rec("chained")) // due within the same advance
	})
	c.Advance(5 * time.Second)
	want := []string{"a", "b", "chained", "c"}
	if len(got) != len(want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ran %v, want %v", got, want)
		}
	}
	if at[0] != time.Second || at[1] != 2500*time.Millisecond {
		t.Errorf("timers saw times %v", at)
	}
	if c.Now().Sub(start) != 5*time.Second {
		t.Errorf("Now after Advance = %v", c.Now().Sub(start))
	}
	c.Advance(5 * time.Second)
	if got[len(got)-1] != "later" {
		t.Errorf("later timer did not run: %v", got)
	}
	if stopped.Stop() {
		t.Error("Stop of a stopped timer reported true")
	}
}

func TestRealClock(t *testing.T) {
	var c Clock = Real{}
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done
	if time.Since(c.Now()) > time.Minute {
		t.Error("Real.Now is not the wall clock")
	}
}
