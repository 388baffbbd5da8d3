package bench

import (
	"testing"
	"time"
)

// The send lag counts from a slot's scheduled time, or from when the
// sender came back for it if it was busy waiting on the broker until
// after then: only the second part is the load generator's own delay.
func TestSendLagLeavesOutTheBrokersWait(t *testing.T) {
	lag := func(sched, free time.Time) float64 {
		t.Helper()
		start := time.Now().Add(-time.Hour)
		c := &Config{Rate: 1000}
		p := &sendPlan{c: c, stats: NewStats(start, 0)}
		p.noteLag(sched, free)
		r := p.stats.result(c, "run")
		if r.SendLag.Count != 1 {
			t.Fatalf("%d lags recorded, want 1", r.SendLag.Count)
		}
		return r.SendLag.MaxMs
	}
	now := time.Now()
	if got := lag(now.Add(-50*time.Millisecond), time.Time{}); got < 50 {
		t.Errorf("a first slot 50 ms overdue: lag %.2f ms, want at least 50", got)
	}
	if got := lag(now.Add(-50*time.Millisecond), now.Add(-2*time.Millisecond)); got < 2 || got >= 50 {
		t.Errorf("a slot 50 ms overdue, the sender back from the broker 2 ms ago: lag %.2f ms, want 2 up to well under 50", got)
	}
	c := &Config{}
	p := &sendPlan{c: c, stats: NewStats(now, 0)}
	p.noteLag(now.Add(-time.Second), time.Time{})
	if r := p.stats.result(c, "run"); r.SendLag.Count != 0 {
		t.Errorf("no target rate, yet %d lags recorded", r.SendLag.Count)
	}
}
