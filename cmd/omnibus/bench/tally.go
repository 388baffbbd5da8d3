package bench

import (
	"fmt"
	"maps"
	"strings"
)

// Tally is a [Ledger]'s account of a run. Counts of deliveries are summed
// over all streams.
type Tally struct {
	Allocated   int64 `json:"allocated"`   // sequence numbers handed out
	Sent        int64 `json:"sent"`        // handed to the transport
	Acked       int64 `json:"acked"`       // accepted by the broker
	SendFailed  int64 `json:"sendFailed"`  // rejected or failed (may still arrive)
	Deliveries  int64 `json:"deliveries"`  // every delivery of this run's messages
	Unique      int64 `json:"unique"`      // distinct (message, stream) pairs delivered
	Redelivered int64 `json:"redelivered"` // extra deliveries explained by our releases
	Duplicates  int64 `json:"duplicates"`  // extra deliveries nothing explains
	Lost        int64 `json:"lost"`        // acked but never delivered (when checked)
	OutOfOrder  int64 `json:"outOfOrder"`  // first deliveries out of order within a session
	// OrderExplained counts first deliveries out of order within a
	// session that deliveries the client gave back unseen explain
	// ([Ledger.ReleasedUnseen]); not a violation.
	OrderExplained int64 `json:"orderExplained,omitempty"`
	Misrouted      int64 `json:"misrouted"`   // delivered in another session than sent
	Unknown        int64 `json:"unknown"`     // this run's id with a sequence never allocated
	Foreign        int64 `json:"foreign"`     // messages of other runs (not an error)
	LossChecked    bool  `json:"lossChecked"` // whether Lost was computed
	// Partitions counts deliveries by the partition their broker
	// sequence number names (top 16 bits; only 0 on an entity without
	// partitions, none when deliveries carry no sequence number).
	Partitions map[int]int64 `json:"partitions,omitempty"`
	Examples   []string      `json:"examples,omitempty"`

	// Completions confirmed by the broker and completions whose answer
	// never came, counted once per (message, stream); deliveries after a
	// confirmed completion (a violation) and after an unanswered one
	// (allowed: the broker may not have applied it); deliveries of
	// messages never handed to a transport (a violation). Of the
	// (message, stream) pairs delivered but never confirmed completed:
	// those with an unanswered completion (the broker may have applied
	// it), and those with none at all. Runs whose receivers report
	// completions judge these; the ledger cannot (see package soak).
	Completed       int64 `json:"completed"`
	Unanswered      int64 `json:"unanswered"`
	CompletedAgain  int64 `json:"completedAgain"`
	UnansweredAgain int64 `json:"unansweredAgain"`
	NeverSent       int64 `json:"neverSent"`
	OnlyUnanswered  int64 `json:"onlyUnanswered"`
	NeverCompleted  int64 `json:"neverCompleted"`
	// UnackedDelivered counts (message, stream) pairs delivered whose
	// send was never acknowledged: failed sends stored after all.
	UnackedDelivered int64 `json:"unackedDelivered"`
}

// Problems is the number of violations found: loss, duplicates,
// misordering, misrouting, unknown messages, messages never sent and
// redeliveries after a confirmed completion.
func (t Tally) Problems() int64 {
	return t.Lost + t.Duplicates + t.OutOfOrder + t.Misrouted + t.Unknown + t.NeverSent + t.CompletedAgain
}

// Err returns nil when the run's accounting is clean, or an error naming
// every kind of violation found.
func (t Tally) Err() error {
	if t.Problems() == 0 {
		return nil
	}
	var parts []string
	add := func(n int64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(t.Lost, "lost")
	add(t.Duplicates, "duplicated")
	add(t.OutOfOrder, "out of order")
	add(t.Misrouted, "misrouted")
	add(t.Unknown, "unknown")
	add(t.NeverSent, "delivered but never sent")
	add(t.CompletedAgain, "delivered again after a confirmed completion")
	msg := "verification failed: " + strings.Join(parts, ", ")
	if ex := t.Examples; len(ex) > 0 {
		msg += " (e.g. " + strings.Join(ex[:min(len(ex), 3)], "; ") + ")"
	}
	return fmt.Errorf("%s", msg)
}

// operations counts the acknowledged sends and the deliveries so far.
func (t Tally) operations() int64 { return t.Acked + t.Deliveries }

// Tally counts the run so far. With checkLoss, every acknowledged message
// that some stream never delivered counts as lost: pass it once receivers
// have drained everything they were meant to.
func (l *Ledger) Tally(checkLoss bool) Tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := Tally{
		Allocated:      int64(len(l.state)),
		OutOfOrder:     l.outOfOrder,
		OrderExplained: l.orderExplained,
		Misrouted:      l.misrouted,
		Unknown:        l.unknown,
		Foreign:        l.foreign,
		LossChecked:    checkLoss,
		Partitions:     maps.Clone(l.partitions),
	}
	l.completionTallyLocked(&t)
	examples := append([]string(nil), l.examples...)
	for m, st := range l.state {
		if st&stSent != 0 {
			t.Sent++
		}
		if st&stAcked != 0 {
			t.Acked++
		}
		if st&stFailed != 0 {
			t.SendFailed++
		}
		for s := range l.streams {
			i := m*l.streams + s
			n := int64(l.recv[i])
			t.Deliveries += n
			if n == 0 {
				if checkLoss && st&stAcked != 0 {
					t.Lost++
					if len(examples) < maxExamples {
						examples = append(examples, fmt.Sprintf("seq %d never delivered on stream %d", m+1, s))
					}
				}
				continue
			}
			t.Unique++
			if st&stAcked == 0 {
				t.UnackedDelivered++
			}
			extra := n - 1
			explained := min(extra, int64(l.released[i]))
			t.Redelivered += explained
			if d := extra - explained; d > 0 {
				t.Duplicates += d
				if len(examples) < maxExamples {
					examples = append(examples, fmt.Sprintf("seq %d delivered %d times on stream %d, %d explained", m+1, n, s, explained))
				}
			}
		}
	}
	t.Examples = examples
	return t
}
