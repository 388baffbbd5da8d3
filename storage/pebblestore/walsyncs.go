package pebblestore

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walSyncFS wraps a file system and counts the fsyncs of WAL files into
// Options.WALSyncs, so benchmarks can show how many messages each fsync
// carried: the direct measure of group commit.
type walSyncFS struct {
	vfs.FS
	syncs *atomic.Int64
}

func (fs walSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return walSyncFile{File: f, syncs: fs.syncs}, nil
}

// Create implements vfs.FS.
func (fs walSyncFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, cat)
	return fs.wrap(name, f, err)
}

// ReuseForWrite implements vfs.FS; Pebble recycles old WAL files this way.
func (fs walSyncFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, cat)
	return fs.wrap(newname, f, err)
}

// OpenReadWrite implements vfs.FS.
func (fs walSyncFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, cat, opts...)
	return fs.wrap(name, f, err)
}

type walSyncFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f walSyncFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

func (f walSyncFile) SyncData() error {
	f.syncs.Add(1)
	return f.File.SyncData()
}
