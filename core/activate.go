package core

import "context"

// ActivateScheduled makes scheduled messages of a queue or topic, named
// by sequence number, available now instead of at their scheduled time,
// as if that time had come: the test clock's "deliver now"
// (core/namespace). On a topic it activates the message in every
// subscription that holds a copy. Numbers of messages not (or no longer)
// scheduled are ignored; it returns how many copies it activated. The
// activation itself happens on the broker's timer, at once but after
// ActivateScheduled returns, exactly as when a schedule falls due.
func (b *Broker) ActivateScheduled(ctx context.Context, path string, seqs []int64) (int, error) {
	a := ParseAddress(path)
	if a.DeadLetter || a.Sub != "" {
		return 0, errf(CodeBadRequest, "scheduled messages are on the queue or topic, not on '%s'", a.String())
	}
	e, err := b.lookup(a)
	if err != nil {
		return 0, err
	}
	qs := []*queue{e.q}
	if e.q == nil {
		qs = qs[:0]
		if subs := e.subs.Load(); subs != nil {
			for _, s := range *subs {
				qs = append(qs, s.q)
			}
		}
	}
	now := b.Now()
	n := 0
	for _, q := range qs {
		q.mu.Lock()
		if !q.mu.closed {
			for _, s := range seqs {
				if r := q.mu.scheduled[s]; r != nil {
					q.setTimerLocked(r, now)
					n++
				}
			}
		}
		q.mu.Unlock()
	}
	return n, nil
}
