package bench

import (
	"fmt"
	"strings"
	"testing"
)

// sendAll allocates n messages of session, marks them sent and acked.
func sendAll(l *Ledger, session string, n int) []uint64 {
	var seqs []uint64
	for range n {
		seq := l.Next(session)
		l.Sent(seq)
		l.Acked(seq)
		seqs = append(seqs, seq)
	}
	return seqs
}

func TestLedgerClean(t *testing.T) {
	l := NewLedger("run", 1)
	seqs := sendAll(l, "", 5)
	if got := l.Pending(); got != 5 {
		t.Fatalf("Pending = %d, want 5", got)
	}
	for _, s := range seqs {
		l.Received(0, Delivery{RunID: "run", Seq: s})
	}
	tl := l.Tally(true)
	if tl.Sent != 5 || tl.Acked != 5 || tl.Unique != 5 || tl.Deliveries != 5 {
		t.Errorf("tally %+v, want 5 sent, acked, delivered", tl)
	}
	if err := tl.Err(); err != nil {
		t.Errorf("clean run reported %v", err)
	}
	if got := l.Pending(); got != 0 {
		t.Errorf("Pending = %d, want 0", got)
	}
}

func TestLedgerLossDetected(t *testing.T) {
	l := NewLedger("run", 1)
	seqs := sendAll(l, "", 3)
	l.Received(0, Delivery{RunID: "run", Seq: seqs[0]})
	l.Received(0, Delivery{RunID: "run", Seq: seqs[2]})
	if tl := l.Tally(false); tl.Lost != 0 || tl.Err() != nil {
		t.Errorf("loss reported without checking: %+v", tl)
	}
	tl := l.Tally(true)
	if tl.Lost != 1 {
		t.Fatalf("Lost = %d, want 1", tl.Lost)
	}
	if err := tl.Err(); err == nil || !strings.Contains(err.Error(), "1 lost") || !strings.Contains(err.Error(), "seq 2") {
		t.Errorf("Err = %v, want 1 lost naming seq 2", err)
	}
}

func TestLedgerFailedSendIsNotLoss(t *testing.T) {
	l := NewLedger("run", 1)
	seq := l.Next("")
	l.Sent(seq)
	l.SendFailed(seq)
	tl := l.Tally(true)
	if tl.Lost != 0 || tl.SendFailed != 1 {
		t.Errorf("tally %+v, want no loss and 1 failed send", tl)
	}
}

func TestLedgerDuplicateDetected(t *testing.T) {
	l := NewLedger("run", 1)
	seqs := sendAll(l, "", 2)
	l.Received(0, Delivery{RunID: "run", Seq: seqs[0]})
	l.Received(0, Delivery{RunID: "run", Seq: seqs[1]})
	l.Received(0, Delivery{RunID: "run", Seq: seqs[1]})
	tl := l.Tally(true)
	if tl.Duplicates != 1 || tl.Redelivered != 0 {
		t.Fatalf("tally %+v, want 1 duplicate", tl)
	}
	if err := tl.Err(); err == nil || !strings.Contains(err.Error(), "1 duplicated") {
		t.Errorf("Err = %v, want a duplicate", err)
	}
}

func TestLedgerRedeliveryExplained(t *testing.T) {
	l := NewLedger("run", 1)
	seqs := sendAll(l, "", 1)
	// The redelivery may be seen before we learn the lock was lost.
	l.Received(0, Delivery{RunID: "run", Seq: seqs[0]})
	l.Received(0, Delivery{RunID: "run", Seq: seqs[0]})
	l.Released(0, seqs[0])
	tl := l.Tally(true)
	if tl.Redelivered != 1 || tl.Duplicates != 0 || tl.Err() != nil {
		t.Errorf("tally %+v, want 1 explained redelivery and no error", tl)
	}
	// A third delivery with only one release is a duplicate.
	l.Received(0, Delivery{RunID: "run", Seq: seqs[0]})
	if tl := l.Tally(true); tl.Duplicates != 1 || tl.Redelivered != 1 {
		t.Errorf("tally %+v, want 1 explained and 1 duplicate", tl)
	}
}

func TestLedgerOutOfOrderPerSession(t *testing.T) {
	l := NewLedger("run", 1)
	a := sendAll(l, "a", 3)
	b := sendAll(l, "b", 2)
	// Sessions interleave freely; only order within one counts.
	l.Received(0, Delivery{RunID: "run", Seq: b[0], Session: "b"})
	l.Received(0, Delivery{RunID: "run", Seq: a[0], Session: "a"})
	l.Received(0, Delivery{RunID: "run", Seq: a[2], Session: "a"})
	l.Received(0, Delivery{RunID: "run", Seq: b[1], Session: "b"})
	l.Received(0, Delivery{RunID: "run", Seq: a[1], Session: "a"}) // after a[2]: out of order
	tl := l.Tally(true)
	if tl.OutOfOrder != 1 {
		t.Fatalf("OutOfOrder = %d, want 1", tl.OutOfOrder)
	}
	if err := tl.Err(); err == nil || !strings.Contains(err.Error(), `session "a"`) {
		t.Errorf("Err = %v, want session a named", err)
	}
}

func TestLedgerRedeliveryInSessionIsNotDisorder(t *testing.T) {
	l := NewLedger("run", 1)
	a := sendAll(l, "a", 2)
	l.Received(0, Delivery{RunID: "run", Seq: a[0], Session: "a"})
	l.Received(0, Delivery{RunID: "run", Seq: a[1], Session: "a"})
	l.Released(0, a[0])
	l.Received(0, Delivery{RunID: "run", Seq: a[0], Session: "a"}) // redelivered after abandon
	if tl := l.Tally(true); tl.OutOfOrder != 0 || tl.Err() != nil {
		t.Errorf("tally %+v, want clean", tl)
	}
}

// The Go SDK's releaser gives back, unseen, a session message that
// arrived between two receive calls (5) while the broker had already sent
// the next (6): the application first sees 6, then 5. Only as many such
// swaps as the client gave back unseen are explained, each of a message
// sent and not yet seen when the release was recorded; the rest still
// count, and a release in one session explains nothing in another.
func TestLedgerOrderExplainedByUnseenRelease(t *testing.T) {
	l := NewLedger("run", 1)
	a := sendAll(l, "a", 6)
	b := sendAll(l, "b", 2)
	c := sendAll(l, "c", 1)
	d := sendAll(l, "d", 3)
	recv := func(seq uint64, session string) {
		l.Received(0, Delivery{RunID: "run", Seq: seq, Session: session})
	}
	recv(a[0], "a")
	l.ReleasedUnseen(0, "a", 1)
	recv(a[2], "a")
	recv(a[1], "a") // explained by the release
	recv(a[4], "a")
	recv(a[3], "a") // the release is used up: a violation
	recv(b[1], "b")
	recv(b[0], "b") // a's release explains nothing in b
	recv(a[5], "a")

	recv(c[0], "c")
	l.ReleasedUnseen(0, "c", 1)
	c = append(c, sendAll(l, "c", 2)...) // sent after the release: not what it gave back
	recv(c[2], "c")
	recv(c[1], "c") // a violation

	recv(d[0], "d")
	recv(d[2], "d")
	l.ReleasedUnseen(0, "d", 1) // unseen then, but below what was seen: not d[1]
	recv(d[1], "d")             // a violation

	tl := l.Tally(true)
	if tl.OrderExplained != 1 || tl.OutOfOrder != 4 {
		t.Errorf("OrderExplained %d, OutOfOrder %d; want 1 and 4", tl.OrderExplained, tl.OutOfOrder)
	}
	if tl.Err() == nil {
		t.Error("Err = nil with sessions out of order")
	}
	for _, s := range []string{"a", "b", "c", "d"} {
		if ex := strings.Join(tl.Examples, "; "); !strings.Contains(ex, fmt.Sprintf("session %q", s)) {
			t.Errorf("examples %q: want session %s named", ex, s)
		}
	}
}

func TestLedgerMisroutedForeignUnknown(t *testing.T) {
	l := NewLedger("run", 1)
	a := sendAll(l, "a", 1)
	if !l.Received(0, Delivery{RunID: "run", Seq: a[0], Session: "b"}) {
		t.Errorf("own message reported as foreign")
	}
	if l.Received(0, Delivery{RunID: "other-run", Seq: 1}) {
		t.Errorf("other run's message reported as ours")
	}
	l.Received(0, Delivery{RunID: "run", Seq: 99})
	tl := l.Tally(true)
	if tl.Misrouted != 1 || tl.Foreign != 1 || tl.Unknown != 1 {
		t.Errorf("tally %+v, want 1 misrouted, 1 foreign, 1 unknown", tl)
	}
}

func TestLedgerStreams(t *testing.T) {
	l := NewLedger("run", 3)
	seqs := sendAll(l, "", 2)
	if got := l.Pending(); got != 6 {
		t.Fatalf("Pending = %d, want 6", got)
	}
	for s := range 3 {
		l.Received(s, Delivery{RunID: "run", Seq: seqs[0]})
	}
	l.Received(0, Delivery{RunID: "run", Seq: seqs[1]})
	l.Received(2, Delivery{RunID: "run", Seq: seqs[1]})
	tl := l.Tally(true)
	if tl.Lost != 1 || tl.Unique != 5 {
		t.Errorf("tally %+v, want 1 lost (stream 1) and 5 unique", tl)
	}
	if got := l.Pending(); got != 1 {
		t.Errorf("Pending = %d, want 1", got)
	}
}

func TestLedgerDeliveredBeforeAck(t *testing.T) {
	l := NewLedger("run", 1)
	seq := l.Next("")
	l.Sent(seq)
	l.Received(0, Delivery{RunID: "run", Seq: seq}) // the receiver can win the race
	l.Acked(seq)
	if got := l.Pending(); got != 0 {
		t.Errorf("Pending = %d, want 0", got)
	}
}

// Concurrent sends number messages in one order and reach the broker in
// another: session order is the broker's sequence number when known.
func TestLedgerSessionOrderIsBrokerOrder(t *testing.T) {
	l := NewLedger("run", 1)
	a := sendAll(l, "a", 3)
	// The broker accepted a[1] first, then a[0], then a[2].
	l.Received(0, Delivery{RunID: "run", Seq: a[1], Session: "a", BrokerSeq: 10})
	l.Received(0, Delivery{RunID: "run", Seq: a[0], Session: "a", BrokerSeq: 11})
	l.Received(0, Delivery{RunID: "run", Seq: a[2], Session: "a", BrokerSeq: 12})
	if tl := l.Tally(true); tl.OutOfOrder != 0 || tl.Err() != nil {
		t.Fatalf("tally %+v, want clean: broker order was kept", tl)
	}

	l = NewLedger("run", 1)
	a = sendAll(l, "a", 3)
	l.Received(0, Delivery{RunID: "run", Seq: a[0], Session: "a", BrokerSeq: 10})
	l.Received(0, Delivery{RunID: "run", Seq: a[1], Session: "a", BrokerSeq: 12})
	l.Received(0, Delivery{RunID: "run", Seq: a[2], Session: "a", BrokerSeq: 11})
	tl := l.Tally(true)
	if tl.OutOfOrder != 1 {
		t.Fatalf("OutOfOrder = %d, want 1 (broker seq 11 after 12)", tl.OutOfOrder)
	}
	if err := tl.Err(); err == nil || !strings.Contains(err.Error(), "broker seq 11 after 12") {
		t.Errorf("Err = %v, want the broker sequence numbers named", err)
	}
	if tl.Lost != 0 || tl.Duplicates != 0 {
		t.Errorf("tally %+v: loss and duplicates are judged on the ledger's ids", tl)
	}
}

// deliver records a delivery of seq and returns which one it was.
func deliver(l *Ledger, seq uint64) uint32 {
	_, nth := l.Delivered(0, Delivery{RunID: "run", Seq: seq})
	return nth
}

func TestLedgerConfirmedCompletionDeliveredAgain(t *testing.T) {
	l := NewLedger("run", 1)
	seqs := sendAll(l, "", 2)
	l.Completed(0, seqs[0], deliver(l, seqs[0]))
	l.Completed(0, seqs[1], deliver(l, seqs[1]))
	if tl := l.Tally(true); tl.Err() != nil || tl.Completed != 2 {
		t.Fatalf("clean completions: %+v", tl)
	}
	deliver(l, seqs[0]) // after its completion was confirmed
	tl := l.Tally(true)
	if tl.CompletedAgain != 1 || !strings.Contains(fmt.Sprint(tl.Err()), "1 delivered again after a confirmed completion") {
		t.Fatalf("tally %+v, err %v", tl, tl.Err())
	}
}

// A delivery recorded before the confirmation of an earlier delivery's
// completion was recorded still counts: the broker handed the message
// out again while a completion of it was being confirmed.
func TestLedgerCompletionConfirmedAfterALaterDelivery(t *testing.T) {
	l := NewLedger("run", 1)
	seq := sendAll(l, "", 1)[0]
	first := deliver(l, seq)
	deliver(l, seq)
	l.Completed(0, seq, first)
	if tl := l.Tally(true); tl.CompletedAgain != 1 || tl.Err() == nil {
		t.Fatalf("tally %+v", tl)
	}
}

func TestLedgerUnansweredCompletionMayComeBack(t *testing.T) {
	l := NewLedger("run", 1)
	seqs := sendAll(l, "", 2)
	deliver(l, seqs[0])
	l.CompletionUnanswered(0, seqs[0]) // the broker was killed before answering
	l.Completed(0, seqs[0], deliver(l, seqs[0]))
	deliver(l, seqs[1])
	l.CompletionUnanswered(0, seqs[1]) // applied after all: never seen again
	tl := l.Tally(true)
	if tl.Err() != nil || tl.UnansweredAgain != 1 || tl.Unanswered != 2 || tl.Redelivered != 1 || tl.Completed != 1 {
		t.Fatalf("tally %+v, err %v", tl, tl.Err())
	}
}

func TestLedgerDeliveredButNeverSent(t *testing.T) {
	l := NewLedger("run", 1)
	seq := l.Next("") // allocated, never handed to a transport
	deliver(l, seq)
	tl := l.Tally(true)
	if tl.NeverSent != 1 || !strings.Contains(fmt.Sprint(tl.Err()), "never sent") {
		t.Fatalf("tally %+v, err %v", tl, tl.Err())
	}
}
