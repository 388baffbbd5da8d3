package pebblestore

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// Defaults for [Options]. They suit a message broker: small (about 1 KiB)
// values, many more writes than reads, and most keys deleted soon after
// they are written, while keeping an idle process small.
const (
	// DefaultCacheSize is the block cache size. Live messages are mostly
	// read from the memtable, so a small cache suffices and keeps RSS low.
	DefaultCacheSize = 16 << 20
	// DefaultMemTableSize is the steady-state memtable size. The records
	// of a message sent and completed within one memtable's lifetime never
	// reach a blob file, and its body leaves nothing in an sstable either:
	// the body's SingleDelete (storage.Batch.DeleteOnce) and its Set cancel
	// at flush, while the state record's Delete stays as a small tombstone
	// that compactions carry down. Bigger is better for throughput;
	// Pebble starts small and grows to this size, so an
	// idle broker does not pay for it. On a disk smaller than 32 times
	// this, the default is a 32nd of the disk (at least 1 MiB): each
	// write-ahead log file takes 1.1 times the memtable size on disk as
	// soon as it is created, and Pebble keeps several.
	DefaultMemTableSize = 16 << 20
)

// valueSeparationMinSize is the smallest value kept in a blob file rather
// than inline in its sstable: message bodies are, state records are not.
const valueSeparationMinSize = 256

// uncompressedLevels is how many of the top LSM levels store blocks
// uncompressed.
const uncompressedLevels = 3

// Options configures [Open]. The zero value is usable: the OS file system,
// no logging and the Default sizes.
type Options struct {
	// FS is the file system the database lives on; nil means the
	// operating system's. Tests pass vfs.NewMem() or a crashable FS.
	FS vfs.FS
	// InMemory keeps the whole database in memory (a fresh vfs.NewMem),
	// for tests that want Pebble's behaviour without a directory and
	// without importing Pebble themselves. It excludes FS.
	InMemory bool
	// Logger receives Pebble's messages: its informational chatter at
	// Debug, write stalls and slow disks at Warn, background errors at
	// Error. Nil means zap.NewNop().
	Logger *zap.Logger
	// CacheSize is the block cache size in bytes; 0 means
	// DefaultCacheSize.
	CacheSize int64
	// MemTableSize is the memtable size in bytes; 0 means
	// DefaultMemTableSize, or less on a small disk.
	MemTableSize uint64
	// LazySyncDelay bounds how long a batch applied without Sync waits for
	// the disk; 0 means DefaultLazySyncDelay, negative never (for tests
	// that need unsynced writes to stay unsynced).
	LazySyncDelay time.Duration
	// WALSyncs, when set, counts the fsyncs of the write-ahead log (for
	// benchmarks: messages per fsync measure group commit).
	WALSyncs *atomic.Int64
	// DiskReserve is the free space, in bytes, kept on the disk of the
	// database: below it, batches that grow the store are refused with
	// storage.ErrNoSpace (see Store.Apply). 0 means DefaultDiskReserve, or
	// an eighth of a disk smaller than 8 times that; negative means no
	// reserve. It is not enforced where the file system cannot tell its
	// free space (in memory).
	DiskReserve int64
	// Repair opens a database whose write-ahead log is damaged: replay
	// stops where the damage begins and the records after it, acknowledged
	// or not, are lost (a copy of the damaged file is kept). Without it,
	// Open refuses such a database with an error wrapping
	// storage.ErrCorrupt that says where replay stops and how much it
	// would drop.
	Repair bool
	// FailLogSyncs, when set and true, makes every fsync of the
	// write-ahead log fail with EIO without reaching the disk, as a dying
	// disk's would: a fault for tests of the whole process (the soak's
	// --disk-faults), which cannot wrap FS. Nil in production.
	FailLogSyncs *atomic.Bool
	// NoWAL turns Pebble's write-ahead log off: a batch is durable only
	// once the memtable holding it is flushed (Store.StartFlush, or when
	// it fills); after a crash the database is as it was at its last
	// flush, and Sync is ignored. For a replica whose durable copy is a
	// log kept elsewhere (raftstore's state database, replayed from the
	// Raft log).
	NoWAL bool

	// noAutoCompactions turns Pebble's automatic compactions off, for
	// tests that must place values in chosen levels (export_test.go).
	noAutoCompactions bool
}

// logger is o.Logger, or a no-op logger.
func (o Options) logger() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}

// pebbleOptions turns o into Pebble's options for a database in dir. It
// is shared with the raw Pebble benchmarks so that they measure the same
// configuration.
func (o Options) pebbleOptions(dir string) (*pebble.Options, error) {
	if o.InMemory && o.FS != nil {
		return nil, errors.New("pebblestore: Options.InMemory and Options.FS are exclusive")
	}
	if o.CacheSize < 0 {
		return nil, errors.New("pebblestore: negative Options.CacheSize")
	}
	log := o.logger()
	fs := o.FS
	switch {
	case o.InMemory:
		fs = vfs.NewMem()
	case fs == nil:
		fs = vfs.Default
	}
	if o.WALSyncs != nil {
		fs = walSyncFS{FS: fs, syncs: o.WALSyncs}
	}
	popts := &pebble.Options{
		FS:                          fs,
		FormatMajorVersion:          pebble.FormatNewest,
		DisableWAL:                  o.NoWAL,
		DisableAutomaticCompactions: o.noAutoCompactions,
		CacheSize:                   o.CacheSize,
		MemTableSize:                o.MemTableSize,
		Logger:                      pebbleLogger{s: log.Sugar()},
		EventListener:               eventListener(log, nil),

		// A broker must keep accepting sends while compactions catch up,
		// and its deleted keys make L0 files mostly tombstones that
		// compact cheaply: start compacting L0 early, but stall writes
		// much later than Pebble's default of 12 sublevels.
		L0CompactionThreshold: 2,
		L0StopWritesThreshold: 36,
		// Allow a few memtables to queue behind a slow flush instead of
		// stalling every writer after one.
		MemTableStopWritesThreshold: 4,
		// One compaction normally, two when behind (a second core).
		CompactionConcurrencyRange: func() (int, int) {
			return 1, max(1, min(2, runtime.GOMAXPROCS(0)))
		},
	}
	// Messages are short-lived: most are deleted before their sstables
	// leave the top levels, so compressing them there is CPU spent for
	// nothing (snappy was 5.5 % of a send benchmark's CPU). Deeper levels,
	// where a long backlog settles, keep Pebble's default compression.
	for i := range uncompressedLevels {
		popts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	// Message bodies are written once into blob files when a memtable is
	// flushed; sstables keep a small handle, so compactions move handles
	// instead of rewriting every body at each level (compaction was about
	// a fifth of a durable send's CPU). A queue's bodies die in the order
	// they were written, so whole blob files fall out of use together;
	// what garbage remains is rewritten once 20 % of a file is dead.
	popts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           valueSeparationMinSize,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	if popts.CacheSize == 0 {
		popts.CacheSize = DefaultCacheSize
	}
	if popts.MemTableSize == 0 {
		popts.MemTableSize = DefaultMemTableSize
		if total, ok := diskSize(fs, dir); ok {
			popts.MemTableSize = min(DefaultMemTableSize, max(1<<20, total/32&^(1<<20-1)))
		}
	}
	return popts, nil
}

// diskSize returns the size of the file system that holds dir (or, if dir
// does not exist yet, its parent), if the file system can tell.
func diskSize(fs vfs.FS, dir string) (uint64, bool) {
	for range 2 {
		if u, err := fs.GetDiskUsage(dir); err == nil && u.TotalBytes > 0 {
			return u.TotalBytes, true
		}
		dir = fs.PathDir(dir)
	}
	return 0, false
}
