package clustersoak

import (
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// TestOrderBookCatchesDisorderSplitsAndMisroutes: a key's acknowledged
// messages stored out of send order, a key stored in two partitions, a
// message delivered from the queue it was not sent to, each counted; a
// clean key passes, and an unacknowledged message is not checked.
func TestOrderBookCatchesDisorderSplitsAndMisroutes(t *testing.T) {
	o := newOrderBook()
	p := func(part, n int64) int64 { return part<<48 | n }
	send := func(seq uint64, key string, bseq int64, acked bool) {
		o.sending(seq, partitionedQueueName)
		if acked {
			o.acked(seq, key)
		}
		if !o.delivered(seq, partitionedQueueName, bseq) {
			t.Fatalf("seq %d: misrouted", seq)
		}
	}
	send(1, "clean", p(3, 1), true)
	send(2, "clean", p(3, 2), true)
	send(3, "clean", p(3, 1), false) // not acknowledged: not checked
	send(4, "late", p(1, 7), true)
	send(5, "late", p(1, 5), true) // acknowledged after 4, stored before it
	send(6, "split", p(1, 8), true)
	send(7, "split", p(2, 9), true)
	o.sending(8, queueName)
	if o.delivered(8, partitionedQueueName, p(0, 1)) {
		t.Fatal("a message of the plain queue delivered from the partitioned one was not noticed")
	}
	got := o.tally()
	if got.Keys != 3 || got.Checked != 6 || got.OutOfOrder != 1 || got.SplitKeys != 1 || got.Misrouted != 1 {
		t.Fatalf("tally %+v: want 3 keys, 6 checked, 1 out of order, 1 split, 1 misrouted", got)
	}
}

// TestResultFailsOnOrderAndSlowFailovers: the partitioned queue's counts
// and, with MaxFailover, a failover over it fail a run the ledger passes;
// the summary names a failover over 3 s either way.
func TestResultFailsOnOrderAndSlowFailovers(t *testing.T) {
	r := &Result{Drained: true, Failovers: []Failover{
		{How: faultKill, Kind: faultKill, FirstAck: 900 * time.Millisecond},
		{How: faultFreeze, Kind: faultFreeze, FirstAck: 3500 * time.Millisecond},
	}}
	if err := r.Err(); err != nil {
		t.Fatalf("no bound set, nothing wrong: %v", err)
	}
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "within 3s: 1 of 2 failovers; over it: #2 froze (SIGSTOP) after 3500 ms") {
		t.Errorf("the summary does not name the slow failover:\n%s", table.String())
	}
	r.Config.MaxFailover = 3 * time.Second
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "1 failovers over 3s") {
		t.Errorf("a failover over --max-failover: %v", err)
	}
	r.Config.MaxFailover = 0
	for _, o := range []OrderTally{{OutOfOrder: 1}, {SplitKeys: 1}, {Misrouted: 1}} {
		r.Order = o
		if r.Err() == nil {
			t.Errorf("order tally %+v passes", o)
		}
	}
	r.Order = OrderTally{}
	for _, tl := range []bench.Tally{{OutOfOrder: 1}, {Misrouted: 1}} {
		r.Tally = tl
		if r.Err() == nil {
			t.Errorf("a session's tally %+v passes", tl)
		}
	}
}
