package core

import (
	"sync/atomic"
	"unsafe"
)

// The hand-over cache.
//
// A queue keeps the bodies of messages it has just been sent (and those a
// read-ahead loaded) in memory, so a receiver gets them without a storage
// read. What it keeps is bounded twice: each queue holds at most
// QueueCacheBytes, and all queues together at most
// Limits.BodyCacheBytes, so many queues or huge messages cannot grow it
// past the budget; a body that does not fit is simply read from the store
// when delivered. A cached message costs its accounted size plus the
// Message it lives in (a few hundred bytes), so a flood of tiny messages
// fills the cache as fast as their memory does.

// messageStructBytes is the memory of a Message beyond its Size.
const messageStructBytes = int64(unsafe.Sizeof(Message{}))

// cacheCost is what keeping r's message in memory counts against the
// cache budgets.
func cacheCost(r *msgRec) int64 { return int64(r.size) + messageStructBytes }

// bodyCache is the broker-wide account of cached messages.
type bodyCache struct {
	used atomic.Int64 // bytes held by every queue's cached messages
}

// BodyCache is a body cache account several brokers share
// (Config.BodyCache): the namespaces of one process, so that
// Limits.BodyCacheBytes bounds them all together.
type BodyCache struct{ c bodyCache }

// NewBodyCache returns an empty shared account.
func NewBodyCache() *BodyCache { return &BodyCache{} }

// take reserves n bytes of the budget max, or reports that they do not fit.
func (c *bodyCache) take(n, max int64) bool {
	if c.used.Add(n) <= max {
		return true
	}
	c.used.Add(-n)
	return false
}

// cacheLocked keeps m as r's body in memory if both budgets allow, and
// reports whether it did. r must have no cached body.
func (q *queue) cacheLocked(r *msgRec, m *Message) bool {
	n := cacheCost(r)
	if q.mu.closed || q.cachedBytes.Load()+n > QueueCacheBytes || !q.b.cache.take(n, q.b.cfg.Limits.BodyCacheBytes) {
		return false
	}
	q.cachedBytes.Add(n)
	r.msg = m
	return true
}

// cacheRoomLocked is how much more q could cache now: the smaller of its
// own share's rest and the broker budget's.
func (q *queue) cacheRoomLocked() int64 {
	return min(QueueCacheBytes-q.cachedBytes.Load(), q.b.cfg.Limits.BodyCacheBytes-q.b.cache.used.Load())
}

// dropCacheLocked forgets r's cached body, if any.
func (q *queue) dropCacheLocked(r *msgRec) {
	if r.msg == nil {
		return
	}
	r.msg = nil
	if q.mu.closed {
		return // closeCacheLocked returned everything already
	}
	n := cacheCost(r)
	q.cachedBytes.Add(-n)
	q.b.cache.used.Add(-n)
}

// closeCacheLocked returns a deleted queue's share of the broker's budget.
func (q *queue) closeCacheLocked() {
	q.b.cache.used.Add(-q.cachedBytes.Swap(0))
}

// CacheBytes reports the bytes the hand-over cache holds now, across all
// queues (and all brokers sharing Config.BodyCache), for tests and
// diagnostics.
func (b *Broker) CacheBytes() int64 { return b.cache.used.Load() }
