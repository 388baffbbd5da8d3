package pebblestore

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Commits in flight when the disk fails.
//
// A commit waits in Pebble for the write-ahead log's fsync. When that
// fsync fails the store parks Pebble's log writer for good (see faults),
// and when a write Pebble cannot do without blocks on the disk, Pebble
// may stop in the middle of its commit pipeline: a caller inside
// pebble.Batch.Commit would then never come back, and neither would the
// answer its client waits for, nor a shutdown that waits for the caller.
//
// So Apply does not call Commit itself: a goroutine of the store's does,
// and Apply waits for it or for the store to release its callers (the disk
// failed: see faults.release), whichever comes first. A released caller
// gets an error wrapping storage.ErrUnavailable and
// storage.ErrOutcomeUnknown: the batch may have reached the disk or not,
// which a restart tells (or, if the disk comes back, the commit's own
// end). The goroutine stays where Pebble holds it.
//
// The goroutines are kept for the next commit, as core/gopool keeps the
// broker's: a commit goes deep into Pebble, and a fresh goroutine would
// grow its stack again every time.

// maxIdleCommitters is how many idle commit goroutines a store keeps:
// about as many as commits run at once under load.
const maxIdleCommitters = 64

// commitJob is one commit handed to a committer.
type commitJob struct {
	pb   *pebble.Batch
	wo   *pebble.WriteOptions
	done chan error // buffered: the committer never waits for the caller
}

// committers keeps the idle commit goroutines of a store.
type committers struct {
	mu     sync.Mutex       // guards the fields below
	idle   []chan commitJob // their inboxes, the latest idle last
	closed bool             // the store closed: idle committers exit
}

// donePool recycles the channels a committer answers on. A channel whose
// caller stopped waiting is not returned: its answer may still come.
var donePool = sync.Pool{New: func() any { return make(chan error, 1) }}

// commitWatched commits pb with wo on a committer and waits for it, or
// until the store releases its callers. It takes pb over: the committer
// closes it.
func (s *Store) commitWatched(pb *pebble.Batch, wo *pebble.WriteOptions) error {
	done := donePool.Get().(chan error)
	release := s.faults.releaseC()
	s.committers.start(s, commitJob{pb: pb, wo: wo, done: done})
	select {
	case err := <-done:
		donePool.Put(done)
		return err
	case <-release:
	}
	select { // an answer that came with the release is still an answer
	case err := <-done:
		donePool.Put(done)
		return err
	default:
	}
	return s.faults.doomedError()
}

// start runs j on an idle committer, or on a new one.
func (c *committers) start(s *Store, j commitJob) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		inbox := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		inbox <- j // buffered: taken whenever the committer gets there
		return
	}
	c.mu.Unlock()
	go c.commitLoop(s, make(chan commitJob, 1), j)
}

// close lets the idle committers exit, and every other one once its
// commit is done (one Pebble holds stays where it is).
func (c *committers) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, inbox := range c.idle {
		close(inbox)
	}
	c.idle = nil
}

// commitLoop runs commits until the store closes or enough others are
// idle.
func (c *committers) commitLoop(s *Store, inbox chan commitJob, j commitJob) {
	for {
		err := s.protect("commit", true, nil, func() error { return j.pb.Commit(j.wo) })
		_ = j.pb.Close()
		j.done <- err
		c.mu.Lock()
		if c.closed || len(c.idle) >= maxIdleCommitters {
			c.mu.Unlock()
			return
		}
		c.idle = append(c.idle, inbox)
		c.mu.Unlock()
		var ok bool
		if j, ok = <-inbox; !ok {
			return
		}
	}
}
