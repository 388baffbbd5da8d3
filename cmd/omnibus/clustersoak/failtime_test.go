package clustersoak

import (
	"testing"
	"time"
)

// Only the new leader's acknowledgements end a failover: one that
// arrives after the fault took effect but before the new leader served
// (the deposed leader's, written just before it went down) does not
// count, nor do those recorded before the failover's recording started.
func TestFailoverTimeCountsOnlyTheNewLeader(t *testing.T) {
	var a ackTimes
	base := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

	a.add(at(-100)) // before the failover: not recorded
	effect := at(0)
	a.start()
	a.add(at(6)) // the deposed leader's, delivered late
	since := at(1300)
	if d, ok := a.firstAck(effect, since); ok {
		t.Fatalf("before the new leader acknowledged anything: first ack after %s", d)
	}
	a.add(at(1320))
	a.add(at(1310)) // senders record out of order
	a.add(at(1500))
	d, ok := a.firstAck(effect, since)
	if !ok || d != 1310*time.Millisecond {
		t.Fatalf("first ack of the new leader after %s (found %v); want 1310ms", d, ok)
	}
	a.stop()
	a.add(at(1305))
	if d, _ := a.firstAck(effect, since); d != 1310*time.Millisecond {
		t.Fatalf("an acknowledgement after the recording stopped counted: %s", d)
	}
	a.start() // the next failover forgets this one's
	if _, ok := a.firstAck(effect, since); ok {
		t.Fatal("a new recording kept the previous failover's acknowledgements")
	}
}

// The report gives kills and cut-offs apart (by Kind: How also says,
// with data groups, what the victim led).
func TestFailoverTimesByKind(t *testing.T) {
	r := &Result{Failovers: []Failover{
		{How: "killed (the meta leader)", Kind: faultKill, FirstAck: 900 * time.Millisecond},
		{How: "cut off", Kind: faultCut, FirstAck: 1800 * time.Millisecond},
		{How: "killed", Kind: faultKill, FirstAck: 700 * time.Millisecond},
	}}
	if k, c := r.FirstAcks("killed"), r.FirstAcks("cut off"); len(k) != 2 || len(c) != 1 || c[0] != 1800*time.Millisecond {
		t.Fatalf("kills %v, cut-offs %v", k, c)
	}
	if got := spread(r.FirstAcks("killed")); got != "700–900 ms (median 900 ms, 2 failovers)" {
		t.Fatalf("spread of the kills: %s", got)
	}
}
