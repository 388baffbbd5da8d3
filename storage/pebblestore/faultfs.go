package pebblestore

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// faultFS is the file system Pebble sees. It keeps a failing disk from
// reaching Pebble's fatal paths (see faults) and reports the disk's state:
//
//   - A write of any file that fails is retried until it succeeds: for
//     the files whose failure Pebble cannot survive (the write-ahead log,
//     the MANIFEST, the marker files, blob files: see fileRole.class)
//     whatever the error, for other files when the error is a disk fault
//     (isDiskFault). Pebble sees a slow disk, never a failed one.
//   - A failed fsync of such a file, or of the directory, parks its
//     caller for good (see faults.park); of an sstable it is returned, as
//     Pebble then writes the flush again, and new sstables and blob files
//     are paced while it keeps failing.
//   - SyncTo (sync_file_range, a hint) never fails: the fsync after it
//     reports any error.
//   - A file or directory outside the store's directory is a copy: a
//     checkpoint's (a backup's, a snapshot for a replica). Its failures,
//     of any operation, are returned at once and never park anything:
//     the checkpoint fails and the store goes on.
type faultFS struct {
	vfs.FS
	faults *faults
	mark   *walMark // told how far each log file is synced; nil: not
	// storeDir is the store's directory, which holds its write-ahead log
	// files and every other file of its own. A file elsewhere is a copy (a
	// checkpoint's: roleCopy); a .log file there says nothing of the log's
	// length.
	storeDir string
	// failLogSyncs, when true, fails the log's fsyncs (Options.FailLogSyncs).
	failLogSyncs *atomic.Bool

	mu sync.Mutex // guards the fields below
	// created holds the files created while the store opens, true while
	// open for writing; nil once the store is open.
	created map[string]bool
	// lock is the directory lock Pebble took, released by the store when
	// it abandons Pebble (Pebble never will).
	lock io.Closer
}

// Lock implements vfs.FS, keeping the lock so that it can be released.
func (fs *faultFS) Lock(name string) (io.Closer, error) {
	l, err := fs.FS.Lock(name)
	if err == nil {
		fs.mu.Lock()
		fs.lock = l
		fs.mu.Unlock()
	}
	return l, err
}

// releaseLock releases the directory lock of an abandoned database, so
// that the directory can be opened again in this process.
func (fs *faultFS) releaseLock() {
	fs.mu.Lock()
	l := fs.lock
	fs.lock = nil
	fs.mu.Unlock()
	if l != nil {
		_ = l.Close()
	}
}

// Remove implements vfs.FS. An abandoned database removes nothing.
func (fs *faultFS) Remove(name string) error {
	fs.faults.parkIfAbandoned()
	return fs.FS.Remove(name)
}

// RemoveAll implements vfs.FS. An abandoned database removes nothing.
func (fs *faultFS) RemoveAll(name string) error {
	fs.faults.parkIfAbandoned()
	return fs.FS.RemoveAll(name)
}

// noteCreated records a file created while the store opens.
func (fs *faultFS) noteCreated(name string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.created != nil {
		fs.created[name] = true
	}
}

// noteClosed records that a file created while opening was closed.
func (fs *faultFS) noteClosed(name string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, ok := fs.created[name]; ok {
		fs.created[name] = false
	}
}

// unfinished returns the files created while the store opened that are
// still open for writing: Pebble refers to a file (an sstable from the
// MANIFEST, a new MANIFEST from its marker) only once it closed it, so
// none of these is part of the database.
func (fs *faultFS) unfinished() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var names []string
	for name, open := range fs.created {
		if open {
			names = append(names, name)
		}
	}
	return names
}

// openDone stops recording created files.
func (fs *faultFS) openDone() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.created = nil
}

// fileRole says how faultFS treats a file, from its name.
type fileRole uint8

const (
	roleOther    fileRole = iota // OPTIONS, temporary files, LOCK
	roleCritical                 // write-ahead log, MANIFEST, markers, the directory
	roleBlob                     // blob files (bodies), written by flushes and compactions
	roleTable                    // sstables: Pebble writes them again on failure
	roleCopy                     // outside the store's directory: a checkpoint's files
)

// roleOf returns the role of the file name.
func (fs *faultFS) roleOf(name string) fileRole {
	if fs.FS.PathDir(name) != fs.storeDir {
		return roleCopy
	}
	switch base := baseName(name); {
	case strings.HasSuffix(base, ".log"), strings.HasPrefix(base, "MANIFEST-"), strings.HasPrefix(base, "marker."):
		return roleCritical
	case strings.HasSuffix(base, ".blob"):
		return roleBlob
	case strings.HasSuffix(base, ".sst"):
		return roleTable
	}
	return roleOther
}

// class says what a failure of a file's writes does to Pebble.
func (r fileRole) class() opClass {
	switch r {
	case roleCritical:
		// A commit waits on the log; a failed write of the log or the
		// MANIFEST ends the process or wedges Pebble.
		return opClass{holdsCommits: true, mustNotFail: true}
	case roleBlob:
		// Pebble v2.1 dereferences nil when a blob file fails to finish
		// (its writer aborts a writable it already closed): no error of a
		// blob file's may reach it. Only flushes wait on it.
		return opClass{mustNotFail: true}
	case roleCopy:
		// A checkpoint's file: its failure fails the checkpoint, whose
		// caller (a backup, a snapshot for a replica) reports it or tries
		// again; nothing of the store waits on it.
		return opClass{failsAtOnce: true}
	}
	return opClass{}
}

// flushOutput reports whether a file is written by flushes and compactions.
func (r fileRole) flushOutput() bool { return r == roleBlob || r == roleTable }

// baseName is the last element of path, for messages.
func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// retryOpen runs an operation that creates or opens a file for writing,
// retried as its file's role requires.
func (fs *faultFS) retryOpen(what, name string, open func() (vfs.File, error)) (vfs.File, error) {
	role := fs.roleOf(name)
	if role.flushOutput() {
		fs.faults.pauseBeforeCreate()
	}
	class := role.class()
	var f vfs.File
	err := fs.faults.retry(what+" "+name, name, class, func() error {
		var err error
		f, err = open()
		if err != nil && !class.mustNotFail && !isDiskFault(err) {
			return permanent{err}
		}
		return err
	})
	if err != nil {
		return nil, unwrapPermanent(err)
	}
	return fs.wrap(name, role, f), nil
}

func (fs *faultFS) wrap(name string, role fileRole, f vfs.File) vfs.File {
	ff := &faultFile{File: f, fs: fs, path: name, name: baseName(name), role: role}
	if n, ok := walLogNum(name); ok && role != roleCopy {
		ff.logNum, ff.wal = n, true
	}
	if role.flushOutput() {
		// Written whole, then synced: gather Pebble's 4 KiB writes
		// (bufwrite.go). Each gathered write is still one faultFile
		// write, retried and reported as before.
		return newBufferedFile(ff)
	}
	return ff
}

// Create implements vfs.FS.
func (fs *faultFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	fs.noteCreated(name)
	return fs.retryOpen("creating", name, func() (vfs.File, error) { return fs.FS.Create(name, cat) })
}

// OpenReadWrite implements vfs.FS.
func (fs *faultFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.retryOpen("opening", name, func() (vfs.File, error) { return fs.FS.OpenReadWrite(name, cat, opts...) })
}

// ReuseForWrite implements vfs.FS; Pebble recycles old log files this way:
// a rename, then an open for reading and writing, made here as two calls
// of the file system below, as its default (disk) implementation makes
// them. (Pebble's crashable MemFS takes its crash-image lock twice within
// its own ReuseForWrite, which deadlocks with a CrashClone arriving in
// between: TestLogReuseNeverDeadlocksACrashImage.) A rename that fails
// because an earlier attempt made it (the old name gone, the new there)
// leaves only the open to retry.
func (fs *faultFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	fs.noteCreated(newname)
	return fs.retryOpen("reusing "+baseName(oldname)+" as", newname, func() (vfs.File, error) {
		if err := fs.FS.Rename(oldname, newname); err != nil && !fs.renamedBefore(oldname, newname) {
			return nil, err
		}
		return fs.FS.OpenReadWrite(newname, cat)
	})
}

// renamedBefore reports whether oldname is gone and newname there, as a
// rename of one to the other leaves them.
func (fs *faultFS) renamedBefore(oldname, newname string) bool {
	if _, err := fs.FS.Stat(oldname); !os.IsNotExist(err) {
		return false
	}
	_, err := fs.FS.Stat(newname)
	return err == nil
}

// OpenDir implements vfs.FS. A directory's fsync makes file creations and
// renames durable: the store's directory is critical, any other a copy's
// (a checkpoint's directory, or the one it is created in).
func (fs *faultFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	role := roleCopy
	if fs.FS.PathDir(fs.FS.PathJoin(name, "f")) == fs.storeDir { // name, cleaned as a file's directory is
		role = roleCritical
	}
	return &faultFile{File: f, fs: fs, path: name, name: "directory " + name, role: role}, nil
}

// Rename implements vfs.FS.
func (fs *faultFS) Rename(oldname, newname string) error {
	return fs.retryNamed("renaming "+baseName(oldname)+" to", newname, func() error { return fs.FS.Rename(oldname, newname) })
}

// Link implements vfs.FS.
func (fs *faultFS) Link(oldname, newname string) error {
	return fs.retryNamed("linking "+baseName(oldname)+" to", newname, func() error { return fs.FS.Link(oldname, newname) })
}

// MkdirAll implements vfs.FS.
func (fs *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.retryNamed("creating directory", dir, func() error { return fs.FS.MkdirAll(dir, perm) })
}

// retryNamed retries a name-space operation while it fails with a disk
// fault; any other error is returned at once.
func (fs *faultFS) retryNamed(what, name string, op func() error) error {
	err := fs.faults.retry(what+" "+name, name, fs.roleOf(name).class(), func() error {
		err := op()
		if err != nil && !isDiskFault(err) {
			return permanent{err}
		}
		return err
	})
	return unwrapPermanent(err)
}

// Unwrap implements vfs.FS.
func (fs *faultFS) Unwrap() vfs.FS { return fs.FS }

// faultFile is a file opened for writing through faultFS.
type faultFile struct {
	vfs.File
	fs   *faultFS
	path string
	name string // for messages
	role fileRole
	// For a file of the store's own write-ahead log (see faultFS.storeDir):
	// its number, and the bytes written so far (the log is written in
	// order, with Write).
	wal     bool
	logNum  uint32
	written atomic.Int64
}

// Write implements vfs.File, retrying until every byte is written.
func (f *faultFile) Write(p []byte) (int, error) {
	done := 0
	err := f.retryWrite(func() error {
		n, err := f.File.Write(p[done:])
		done += n
		return err
	})
	f.written.Add(int64(done))
	return done, err
}

// WriteAt implements vfs.File, retrying until every byte is written.
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	done := 0
	err := f.retryWrite(func() error {
		n, err := f.File.WriteAt(p[done:], off+int64(done))
		done += n
		return err
	})
	return done, err
}

func (f *faultFile) retryWrite(op func() error) error {
	class := f.role.class()
	err := f.fs.faults.retry("writing "+f.path, f.path, class, func() error {
		if err := op(); err != nil {
			if !class.mustNotFail && !isDiskFault(err) {
				return permanent{err}
			}
			return err
		}
		return nil
	})
	err = unwrapPermanent(err)
	if err != nil && f.role.flushOutput() {
		f.fs.faults.flushFailed(err)
	}
	return err
}

// Sync implements vfs.File.
func (f *faultFile) Sync() error { return f.afterSync("fsync of "+f.path, f.sync(f.File.Sync)) }

// SyncData implements vfs.File.
func (f *faultFile) SyncData() error { return f.afterSync("fsync of "+f.path, f.sync(f.File.SyncData)) }

// sync runs the fsync do, unless a fault injected for tests fails it.
func (f *faultFile) sync(do func() error) error {
	if f.wal && f.fs.failLogSyncs != nil && f.fs.failLogSyncs.Load() {
		return fmt.Errorf("injected for a test (Options.FailLogSyncs): %w", syscall.EIO)
	}
	return do()
}

// afterSync handles the outcome of an fsync (see faultFS).
func (f *faultFile) afterSync(what string, err error) error {
	if err == nil {
		if f.wal && f.fs.mark != nil {
			f.fs.mark.noteSynced(f.logNum, f.written.Load())
		}
		if f.role.flushOutput() {
			f.fs.faults.flushSucceeded()
		}
		return nil
	}
	if class := f.role.class(); class.mustNotFail {
		f.fs.faults.park(what, f.path, class, err) // never returns
	}
	if f.role.flushOutput() {
		f.fs.faults.flushFailed(err)
	}
	return err
}

// SyncTo implements vfs.File. It only asks the kernel to start writing
// back; a failure shows again in the fsync that follows, so it is not
// reported here (Pebble would treat it as a failed write).
func (f *faultFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if err != nil {
		return false, nil
	}
	return full, nil
}

// Close implements vfs.File. Closing a file after its fsync cannot lose
// data, and Pebble panics on the error of a log (when rotating it) or a
// blob file, so for the files that must not fail the error is dropped;
// the next fsync reports a failing disk.
func (f *faultFile) Close() error {
	err := f.File.Close()
	f.fs.noteClosed(f.path)
	if f.role.class().mustNotFail {
		return nil
	}
	return err
}
