package raftstore

import "sync"

// workQueue is an unbounded FIFO between goroutines of a node. Pushing
// never blocks, so the loop can hand work to the append and apply
// goroutines, and they can hand responses back, without ever waiting on
// each other. What flows through is bounded by raft itself (uncommitted
// and in-flight limits), not by the queue.
type workQueue[T any] struct {
	mu     sync.Mutex // guards items
	items  []T
	notify chan struct{} // has a token while items is not empty
}

func newWorkQueue[T any]() *workQueue[T] {
	return &workQueue[T]{notify: make(chan struct{}, 1)}
}

// push appends v.
func (q *workQueue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// ready is a channel that has a token when items may be waiting.
func (q *workQueue[T]) ready() <-chan struct{} { return q.notify }

// takeAll removes and returns everything queued, in order.
func (q *workQueue[T]) takeAll() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
