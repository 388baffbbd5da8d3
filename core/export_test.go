package core

import "runtime"

// Quiesce waits until no queue of b has expired messages waiting to be
// dead-lettered or dropped, running the disposal itself if needed. Tests
// on a fake clock call it after each step, since expiry runs on its own
// goroutine (expireLoop) rather than in the caller's.
func Quiesce(b *Broker) {
	b.mu.RLock()
	var qs []*queue
	for _, e := range b.mu.entities {
		if e.q != nil {
			qs = append(qs, e.q, e.q.dead)
		}
	}
	b.mu.RUnlock()
	for _, q := range qs {
		for {
			q.kickExpiry()
			q.mu.Lock()
			idle := !q.mu.expiryBusy && len(q.mu.expiring) == 0
			q.mu.Unlock()
			if idle {
				break
			}
			runtime.Gosched()
		}
	}
}
