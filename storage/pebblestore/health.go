package pebblestore

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
	"go.uber.org/zap"
)

// newReserve returns the free-space reserve for a database in dir on fs;
// bytes is Options.DiskReserve.
func newReserve(fs vfs.FS, dir string, bytes int64) *reserve {
	r := &reserve{fs: fs, dir: dir}
	switch {
	case bytes == 0:
		r.min = DefaultDiskReserve
		if total, ok := diskSize(fs, dir); ok {
			r.min = min(r.min, total/8)
		}
	case bytes > 0:
		r.min = uint64(bytes)
	}
	return r
}

// admit decides whether b may be applied now. Every batch is refused while
// Pebble cannot commit (a write of its log or MANIFEST is blocked, or it
// reported a fatal state). While the disk is below its reserve, or a flush
// keeps failing, only batches that do not grow the store are admitted
// (see shrinks), so settlements go on while sends are refused.
func (s *Store) admit(b *storage.Batch) error {
	if err := s.faults.writeRefusal(); err != nil {
		return err
	}
	refusal := s.faults.growthRefusal()
	if refusal == nil {
		refusal = s.reserve.refusal(batchBytes(b))
	}
	if refusal == nil || s.shrinks(b) {
		return nil
	}
	return refusal
}

// Health implements [storage.HealthReporter]: nil while the store accepts
// every write, else why it refuses some or all of them. An error wrapping
// storage.ErrNoSpace means writes that grow the store are refused (the
// disk is below its reserve, or full) while settlements go on, unless the
// full disk blocks Pebble's own log. Health reads the disk's free space
// when its last reading is stale, and returns nil by itself once space
// returns and blocked writes have gone through.
func (s *Store) Health() error {
	if s.gate.isClosed() {
		return fmt.Errorf("%w: %w", storage.ErrUnavailable, storage.ErrClosed)
	}
	if err := s.faults.writeRefusal(); err != nil {
		return err
	}
	if err := s.faults.growthRefusal(); err != nil {
		return err
	}
	return s.reserve.refusal(0)
}

// healthLog remembers the last health the store logged, so that it logs
// changes, not every blocked write or reading of the free space.
type healthLog struct {
	mu   sync.Mutex // guards the fields below
	kind error      // nil, storage.ErrNoSpace or storage.ErrUnavailable
	msg  string
}

// healthChanged logs the store's health when its kind changed: refusing
// writes (Warn, with the reason) or accepting them again (Info).
func (s *Store) healthChanged() {
	if s.gate.isClosed() {
		return
	}
	err := s.Health()
	var kind error
	switch {
	case errors.Is(err, storage.ErrNoSpace):
		kind = storage.ErrNoSpace
	case err != nil:
		kind = storage.ErrUnavailable
	}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if kind == h.kind {
		return
	}
	h.kind = kind
	if err == nil {
		s.log.Info("store accepts writes again", zap.String("was", h.msg))
		h.msg = ""
		return
	}
	h.msg = err.Error()
	s.log.Warn("store refuses writes", zap.Error(err))
}
