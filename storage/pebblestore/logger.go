package pebblestore

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// pebbleLogger routes Pebble's logger to zap. Pebble logs routine events
// (WAL and table lifecycle on open) through Infof, so those go to Debug.
type pebbleLogger struct {
	s *zap.SugaredLogger
	// onFatal, if set, is told of every Fatalf.
	onFatal func(error)
	// onInfo, if set, sees every Infof call before it is logged (the store
	// watches the end of each WAL's replay this way).
	onInfo func(format string, args []any)
}

var _ pebble.Logger = pebbleLogger{}

// Infof implements pebble.Logger.
func (l pebbleLogger) Infof(format string, args ...any) {
	if l.onInfo != nil {
		l.onInfo(format, args)
	}
	l.s.Debugf(format, args...)
}

// Errorf implements pebble.Logger.
func (l pebbleLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }

// Fatalf implements pebble.Logger. Pebble calls it for states it does not
// know how to continue from (a failed commit or MANIFEST update, a broken
// invariant) and expects it not to return. It never ends the process:
// it stops the store's writes (onFatal), then panics if the caller is one
// of the store's own calls that can unwind to Store.protect, which turns
// the panic into the call's error; on Pebble's background goroutines it
// returns, and Pebble carries on with the error it was handling.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	err := fmt.Errorf("pebble: %s", fmt.Sprintf(format, args...))
	l.s.Errorf("pebble cannot continue; the store refuses writes until omnibus restarts: %v", err)
	if l.onFatal != nil {
		l.onFatal(err)
	}
	if safeToPanic() {
		panic(fatalPanic{err})
	}
}

// eventListener reports the Pebble events an operator should see: write
// stalls (the broker stops accepting sends), slow disks, background errors
// and damaged data. While the store already reports a disk fault, the
// slow-disk events its blocked writes cause are not repeated; the same
// background error is logged at most once a minute.
//
// At Debug it also logs each switch to a new write-ahead log, and each
// memtable flush and compaction with its duration: the background work
// whose moments a latency tail is correlated with (issue 30: the slowest
// 1 % at half the maximum rate began mostly at a switch of log).
func eventListener(log *zap.Logger, f *faults) *pebble.EventListener {
	bg := &repeatLimiter{every: time.Minute}
	return &pebble.EventListener{
		WALCreated: func(info pebble.WALCreateInfo) {
			log.Debug("pebble switched to a new write-ahead log", zap.Uint64("log", uint64(info.FileNum)),
				zap.Uint64("recycled", uint64(info.RecycledFileNum)))
		},
		FlushEnd: func(info pebble.FlushInfo) {
			log.Debug("pebble flushed a memtable", zap.Int("job", int(info.JobID)),
				zap.Uint64("bytes", info.InputBytes), zap.Duration("duration", info.TotalDuration))
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			log.Debug("pebble compacted", zap.Int("job", int(info.JobID)), zap.String("reason", info.Reason),
				zap.Duration("duration", info.TotalDuration))
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			if f != nil {
				f.stalled.Store(true)
				f.notify()
			}
			log.Warn("pebble write stall began", zap.String("reason", info.Reason))
		},
		WriteStallEnd: func() {
			if f != nil {
				f.stalled.Store(false)
				f.notify()
			}
			log.Info("pebble write stall ended")
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			if f != nil && f.anyBlocked() {
				return
			}
			log.Warn("pebble disk slow", zap.String("path", info.Path),
				zap.Duration("duration", info.Duration))
		},
		BackgroundError: func(err error) {
			if bg.allow(err.Error()) {
				log.Error("pebble background error", zap.String("error", err.Error()))
			}
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("pebble found damaged data", zap.String("path", info.Path), zap.String("error", fmt.Sprint(info.Details)))
		},
	}
}

// repeatLimiter lets the same message through at most once per period.
type repeatLimiter struct {
	every time.Duration
	mu    sync.Mutex // guards the fields below
	last  string
	at    time.Time
}

func (r *repeatLimiter) allow(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if msg == r.last && now.Sub(r.at) < r.every {
		return false
	}
	r.last, r.at = msg, now
	return true
}
