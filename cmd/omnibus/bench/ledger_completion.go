package bench

// Completion accounting: what a peek-lock receiver that waits for the
// broker's answer to each completion (receiver-settle-mode second, as the
// Azure SDKs use) learns about every delivery, and what the ledger
// concludes. A completion the broker confirmed removed the message for
// good: any later delivery of it is a violation. A completion whose
// answer never came (the connection died first, say the broker was
// killed) may or may not have been applied: a later delivery is allowed,
// and counted apart. A completion the broker refused (the lock was lost)
// gave the message back, as [Ledger.Released] says.

const (
	cmpConfirmed  uint8 = 1 << iota // the broker confirmed a completion
	cmpUnanswered                   // a completion was sent, its answer lost
)

// Completed records that the broker confirmed the completion of the
// nth delivery ([Ledger.Delivered]) of seq on stream. If a later delivery
// of the message was already recorded, that delivery came after a
// confirmed completion and counts as one.
func (l *Ledger) Completed(stream int, seq uint64, nth uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.indexLocked(stream, seq)
	if !ok {
		return
	}
	l.completion[i] |= cmpConfirmed
	if later := l.recv[i]; later > nth {
		l.completedAgain += int64(later - nth)
		l.exampleLocked("seq %d: delivery %d completed (confirmed) after delivery %d on stream %d", seq, nth, later, stream)
	}
}

// CompletionUnanswered records that a completion of seq on stream was
// sent but no answer came: the broker may have applied it or not. Like
// [Ledger.Released], it explains one later redelivery.
func (l *Ledger) CompletionUnanswered(stream int, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.indexLocked(stream, seq)
	if !ok {
		return
	}
	l.completion[i] |= cmpUnanswered
	l.released[i]++
}

func (l *Ledger) indexLocked(stream int, seq uint64) (int, bool) {
	if seq == 0 || seq > uint64(len(l.state)) || stream < 0 || stream >= l.streams {
		return 0, false
	}
	return int(seq-1)*l.streams + stream, true
}

// judgeDeliveryLocked counts what a delivery of seq on stream (index i)
// says about the broker: a message never sent, or delivered again after
// its completion was confirmed (a violation) or went unanswered (allowed).
func (l *Ledger) judgeDeliveryLocked(seq uint64, stream, i int) {
	if l.state[seq-1]&stSent == 0 {
		l.neverSent++
		l.exampleLocked("seq %d delivered on stream %d but never sent", seq, stream)
	}
	switch {
	case l.completion[i]&cmpConfirmed != 0:
		l.completedAgain++
		l.exampleLocked("seq %d delivered again on stream %d after its completion was confirmed", seq, stream)
	case l.completion[i]&cmpUnanswered != 0:
		l.unansweredAgain++
	}
}

// completionTallyLocked adds the completion counts to t.
func (l *Ledger) completionTallyLocked(t *Tally) {
	t.CompletedAgain = l.completedAgain
	t.UnansweredAgain = l.unansweredAgain
	t.NeverSent = l.neverSent
	for i, c := range l.completion {
		if c&cmpConfirmed != 0 {
			t.Completed++
		}
		if c&cmpUnanswered != 0 {
			t.Unanswered++
		}
		if l.recv[i] > 0 && c&cmpConfirmed == 0 {
			if c&cmpUnanswered != 0 {
				t.OnlyUnanswered++
			} else {
				t.NeverCompleted++
			}
		}
	}
}
