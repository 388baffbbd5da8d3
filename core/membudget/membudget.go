// Package membudget is the process's one bound on the memory peers make
// omnibus hold: incoming messages read and not yet stored, messages taken
// for delivery and not yet written, messages held by open transactions,
// and the answers (console pages, REST and $management replies) that
// carry bodies. Each holder takes bytes from one [Budget] before it holds
// them and gives them back when it lets go; past the limit new work is
// refused (AMQP com.microsoft:server-busy, HTTP 503 with Retry-After),
// which the SDKs retry, and nothing crashes.
//
// Two ways to take bytes: [Budget.TryAcquire] refuses what would go past
// the limit, for work not started yet; [Budget.Acquire] always succeeds,
// for bytes already in memory that can only be accounted for (a delivery
// the peer was allowed to send), so that the next TryAcquire sees them.
//
// After a burst, the Go runtime keeps freed memory for a while: a Budget
// that falls back below an eighth of its limit from a peak of more than
// [trimAbove] asks the runtime to return it to the operating system
// (debug.FreeOSMemory), at most once per [trimEvery].
//
// A nil *Budget is valid and bounds nothing.
package membudget

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Holder names what holds budgeted bytes, for the refusals metric.
type Holder int

// The holders.
const (
	AMQPIncoming    Holder = iota // AMQP deliveries read, not yet stored and answered
	AMQPDelivery                  // messages taken for AMQP receivers, not yet written
	AMQPTransaction               // messages of open transactions
	AMQPReply                     // $management replies
	HTTPRequest                   // REST send bodies
	HTTPAnswer                    // REST receive answers
	ConsolePage                   // console peek pages
	numHolders
)

var holderNames = [numHolders]string{"amqp-incoming", "amqp-delivery", "amqp-transaction", "amqp-reply",
	"http-request", "http-answer", "console-page"}

// String returns the holder's metric label.
func (h Holder) String() string { return holderNames[h] }

// Trimming: when the bytes held fall below an eighth of the limit after a
// peak above trimAbove, the freed memory goes back to the OS, at most once
// per trimEvery and trimDelay after the fall (a burst often ends in
// steps).
const (
	trimAbove = 64 << 20
	trimEvery = 10 * time.Second
	trimDelay = time.Second
)

// Budget counts the bytes held against a limit. It is safe for
// concurrent use.
type Budget struct {
	limit   int64
	used    atomic.Int64
	refused [numHolders]atomic.Int64
	trim    func() // returns freed memory to the OS

	peak     atomic.Int64 // most held since the last trim
	trimming atomic.Bool  // a trim is scheduled
	waiting  atomic.Int32 // len(mu.waiters), read without the lock

	mu struct {
		sync.Mutex           // guards the fields below
		trimAt     time.Time // when the last trim ran
		waiters    []func()  // called once the budget has room again
	}
}

// New returns a Budget of limit bytes; limit ≤ 0 means no limit (the
// bytes are still counted).
func New(limit int64) *Budget {
	return &Budget{limit: limit, trim: debug.FreeOSMemory}
}

// Limit returns the limit in bytes (≤ 0: none).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used returns the bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Over reports whether the bytes held are at or past the limit: new work
// should be refused.
func (b *Budget) Over() bool {
	return b != nil && b.limit > 0 && b.used.Load() >= b.limit
}

// Available returns the bytes that may still be taken (a large number
// when there is no limit).
func (b *Budget) Available() int64 {
	if b == nil || b.limit <= 0 {
		return 1 << 62
	}
	return max(0, b.limit-b.used.Load())
}

// TryAcquire takes n bytes for h if they fit under the limit, and
// reports whether it did; a refusal is counted for h.
func (b *Budget) TryAcquire(h Holder, n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		cur := b.used.Load()
		if b.limit > 0 && cur+n > b.limit {
			b.refused[h].Add(1)
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			b.notePeak(cur + n)
			return true
		}
	}
}

// Acquire takes n bytes whatever the limit: bytes already in memory.
func (b *Budget) Acquire(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.notePeak(b.used.Add(n))
}

// Refuse counts a refusal for h that TryAcquire did not make (work turned
// away because the budget is [Budget.Over]).
func (b *Budget) Refuse(h Holder) {
	if b != nil {
		b.refused[h].Add(1)
	}
}

// Release gives back n bytes taken before.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	used := b.used.Add(-n)
	if used < 0 {
		panic("membudget: released more than was acquired")
	}
	b.afterRelease(used)
}

// Refused returns the refusals so far, by holder name.
func (b *Budget) Refused() map[string]int64 {
	out := make(map[string]int64, numHolders)
	for h := range numHolders {
		var n int64
		if b != nil {
			n = b.refused[h].Load()
		}
		out[h.String()] = n
	}
	return out
}

// NotifyWhenFree calls f once, in its own goroutine, after the budget
// next falls below its limit — at once if it is below it now. Holders
// that stopped taking work because the budget was over use it to start
// again.
func (b *Budget) NotifyWhenFree(f func()) {
	if b == nil || !b.Over() {
		go f()
		return
	}
	b.mu.Lock()
	b.mu.waiters = append(b.mu.waiters, f)
	b.waiting.Store(int32(len(b.mu.waiters)))
	b.mu.Unlock()
	if !b.Over() { // released between the check and the append
		b.wake()
	}
}

// notePeak remembers the most held since the last trim.
func (b *Budget) notePeak(used int64) {
	for {
		p := b.peak.Load()
		if used <= p || b.peak.CompareAndSwap(p, used) {
			return
		}
	}
}

// afterRelease wakes the waiters once there is room, and schedules a
// trim when a large peak has drained.
func (b *Budget) afterRelease(used int64) {
	if b.waiting.Load() > 0 && (b.limit <= 0 || used < b.limit) {
		b.wake()
	}
	peak := b.peak.Load()
	if peak <= trimAbove || used > peak/8 || !b.trimming.CompareAndSwap(false, true) {
		return
	}
	b.mu.Lock()
	wait := max(trimDelay, time.Until(b.mu.trimAt.Add(trimEvery)))
	b.mu.Unlock()
	time.AfterFunc(wait, func() {
		b.trim()
		b.mu.Lock()
		b.mu.trimAt = time.Now()
		b.mu.Unlock()
		b.peak.Store(b.used.Load())
		b.trimming.Store(false)
	})
}

// wake calls the waiters registered with NotifyWhenFree.
func (b *Budget) wake() {
	b.mu.Lock()
	ws := b.mu.waiters
	b.mu.waiters = nil
	b.waiting.Store(0)
	b.mu.Unlock()
	for _, f := range ws {
		go f()
	}
}
