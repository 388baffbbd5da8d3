package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/omnibusmq/omnibus/storage"
)

// DefaultDiskReserve is the free space the store keeps on its disk: below
// it, writes that grow the store are refused with storage.ErrNoSpace, so
// Pebble itself never meets a full disk. It covers what Pebble writes
// besides the data: a new write-ahead log file (1.1 times the memtable,
// allocated when the log is created), a memtable's flush into an sstable
// and a blob file, a compaction's output before its inputs are deleted,
// and the log files Pebble keeps for reuse.
const DefaultDiskReserve = 256 << 20

// Free space is read from the file system (statfs) at most this often, and
// again whenever this much has been written since, whichever comes first.
const (
	reserveCheckInterval = 250 * time.Millisecond
	reserveCheckBytes    = 4 << 20
)

// reserve watches the free space of the store's disk.
type reserve struct {
	fs  vfs.FS
	dir string
	min uint64 // bytes to keep free; 0: no reserve

	// written counts the bytes applied since the last reading.
	written atomic.Int64
	// fresh is set while the last reading is recent and above the
	// reserve: the check every Apply makes.
	fresh atomic.Bool

	mu          sync.Mutex // guards the fields below
	avail       uint64     // free space at the last reading
	readAt      time.Time
	low         bool // avail is below min (until it is back above min plus a margin)
	unsupported bool // the file system cannot tell its free space
	onChange    func()
}

// refusal returns the error a write that grows the store by n bytes is
// refused with because of the reserve, or nil. It reads the free space
// again when the last reading is stale.
func (r *reserve) refusal(n int) error {
	if r == nil || r.min == 0 {
		return nil
	}
	written := r.written.Add(int64(n))
	if r.fresh.Load() && written < r.checkBytes() {
		return nil
	}
	r.mu.Lock()
	stale := written >= r.checkBytes() || time.Since(r.readAt) >= reserveCheckInterval
	if !r.unsupported && stale {
		r.readLocked()
	}
	low, avail := r.low, r.avail
	r.mu.Unlock()
	if !low {
		return nil
	}
	return fmt.Errorf("%w: %s free on the disk of %s, below the reserve of %s",
		storage.ErrNoSpace, formatBytes(avail), r.dir, formatBytes(r.min))
}

// checkBytes is how much may be written between two readings.
func (r *reserve) checkBytes() int64 { return min(reserveCheckBytes, int64(r.min/4)) }

// readLocked reads the free space and updates low, with a margin of a
// sixteenth of the reserve before it clears, so that the state does not
// flap with every write and deletion near the line.
func (r *reserve) readLocked() {
	u, err := r.fs.GetDiskUsage(r.dir)
	if errors.Is(err, vfs.ErrUnsupported) {
		r.unsupported = true
		r.fresh.Store(true) // nothing to read, ever
		return
	}
	r.readAt = time.Now()
	r.written.Store(0)
	if err != nil {
		return // keep the last reading
	}
	r.avail = u.AvailBytes
	was := r.low
	if r.low {
		r.low = u.AvailBytes < r.min+r.min/16
	} else {
		r.low = u.AvailBytes < r.min
	}
	if !r.low {
		r.fresh.Store(true)
		time.AfterFunc(reserveCheckInterval, func() { r.fresh.Store(false) })
	}
	if r.low != was && r.onChange != nil {
		go r.onChange() // not under mu: it reads the health, which locks mu
	}
}

// batchBytes is roughly how much b adds to the store: its keys and values.
func batchBytes(b *storage.Batch) int {
	n := 0
	for _, op := range b.Ops {
		n += len(op.Key) + len(op.Value)
	}
	return n
}

// growthSlack is how many bytes per operation a batch may add and still
// count as not growing the store: a rewritten state record whose counters
// take a byte more.
const growthSlack = 16

// shrinks reports whether applying b would not grow the store: it deletes
// at least as many bytes as it adds, counting a value it overwrites as
// deleted. Settlements (deletions), delivery counts and lock state
// (records rewritten in place) and moves to the dead-letter queue pass;
// sends, which add new records, do not. It reads the keys b touches, so it
// is only asked while the disk is below its reserve.
func (s *Store) shrinks(b *storage.Batch) bool {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false
	}
	defer it.Close()
	// size returns the length of the record stored at key, or -1.
	size := func(key []byte) int {
		if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
			return -1
		}
		lv := it.LazyValue()
		return len(key) + lv.Len()
	}
	growth := 0
	for _, op := range b.Ops {
		switch op.Kind {
		case storage.OpSet:
			growth += len(op.Key) + len(op.Value)
			if old := size(op.Key); old >= 0 {
				growth -= old
			}
		case storage.OpDelete, storage.OpDeleteOnce:
			if old := size(op.Key); old >= 0 {
				growth -= old
			}
		}
		// OpDeletePrefix frees an unknown amount: counted as nothing.
	}
	return it.Error() == nil && growth <= growthSlack*len(b.Ops)
}

// formatBytes prints n in binary units, for messages.
func formatBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
