package pebblestore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// DefaultLazySyncDelay bounds how long a batch applied without Sync waits
// for the disk. Pebble keeps such a batch's WAL record in its own buffer
// until a synced write or a full 32 KiB block sends it on, so without a
// bound a process that crashed after a quiet spell would lose it. A store
// that applied an unsynced batch therefore syncs the WAL this long after,
// unless a synced write covered the batch meanwhile. A receiver that
// settles its own deliveries writes nothing else, so in that workload this
// is one fsync per delay (about 80 µs of CPU on a small VM): 20 ms makes
// that 0.4 % of a core, against 1.6 % at 5 ms.
const DefaultLazySyncDelay = 20 * time.Millisecond

// lazySync makes batches applied without Sync durable within a delay.
type lazySync struct {
	delay time.Duration // < 0: never (tests)
	log   *zap.Logger

	// unsynced counts the unsynced commits made so far; covered is the
	// highest count a synced commit is known to have made durable: one
	// that started after those commits had returned, so its WAL record
	// follows theirs.
	unsynced, covered atomic.Uint64

	mu    sync.Mutex
	armed bool // a sync is scheduled
	timer *time.Timer
}

// noteUnsynced records an unsynced commit that has returned and makes
// sure a sync follows within the delay.
func (l *lazySync) noteUnsynced(s *Store) {
	l.unsynced.Add(1)
	if l.delay < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed {
		return
	}
	l.armed = true
	if l.timer == nil {
		l.timer = time.AfterFunc(l.delay, s.syncLazily)
	} else {
		l.timer.Reset(l.delay)
	}
}

// beforeSynced returns the count a synced commit about to start will
// cover once it returns (pass it to afterSynced).
func (l *lazySync) beforeSynced() uint64 { return l.unsynced.Load() }

// afterSynced records that a synced commit covered the unsynced commits
// counted by n.
func (l *lazySync) afterSynced(n uint64) {
	for {
		c := l.covered.Load()
		if n <= c || l.covered.CompareAndSwap(c, n) {
			return
		}
	}
}

// stop cancels a scheduled sync (Close syncs the WAL itself).
func (l *lazySync) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.armed = false
}

// syncLazily syncs the WAL unless a synced commit already covered every
// unsynced one. It runs on the timer's goroutine.
func (s *Store) syncLazily() {
	l := &s.lazy
	l.mu.Lock()
	l.armed = false
	l.mu.Unlock()
	if err := s.gate.enter(); err != nil {
		return // closed: Close synced the WAL
	}
	defer s.gate.leave()
	n := l.beforeSynced()
	if l.covered.Load() >= n {
		return
	}
	if s.faults.writeRefusal() != nil {
		return // the log cannot be written now; Health says why
	}
	// An empty WAL record with Sync: Pebble's way to sync the log.
	if err := s.protect("sync", true, nil, func() error { return s.db.LogData(nil, pebble.Sync) }); err != nil {
		l.log.Error("pebblestore: syncing unsynced writes", zap.Error(err))
		return
	}
	l.afterSynced(n)
}
