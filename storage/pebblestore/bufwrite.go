package pebblestore

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableWriteBuffer is how many bytes of an sstable or blob file are
// gathered before they are written. Pebble writes these files through a
// 4 KiB bufio.Writer, so a flush or compaction made a system call for
// every 4 KiB; on the 2-core VM a 4 KiB write into a new file costs about
// 4.5 µs of CPU against 1.0 µs per 4 KiB in 128 KiB writes, and flushes
// and compactions write each message's body and records once or more
// (BenchmarkTableWrites).
const tableWriteBuffer = 128 << 10

// bufferedFile gathers the writes of a file that Pebble writes once, from
// start to end, and syncs before it uses it: sstables and blob files.
// Everything that can observe the file's contents or size (a sync, Stat,
// a read, Close) writes the gathered bytes first, so the file Pebble sees
// is the one it wrote. Like the files it wraps, it is not safe for
// concurrent writes.
type bufferedFile struct {
	vfs.File
	buf []byte
}

// newBufferedFile wraps f, a file opened for writing.
func newBufferedFile(f vfs.File) *bufferedFile {
	return &bufferedFile{File: f}
}

// Write implements vfs.File: p is gathered, and the gathered bytes are
// written once there are tableWriteBuffer of them. A large p goes out
// directly after what was gathered before it.
func (f *bufferedFile) Write(p []byte) (int, error) {
	if len(f.buf)+len(p) <= tableWriteBuffer {
		if f.buf == nil {
			f.buf = make([]byte, 0, tableWriteBuffer)
		}
		f.buf = append(f.buf, p...)
		if len(f.buf) == tableWriteBuffer {
			if err := f.flush(); err != nil {
				return 0, err
			}
		}
		return len(p), nil
	}
	if err := f.flush(); err != nil {
		return 0, err
	}
	if len(p) >= tableWriteBuffer {
		return f.File.Write(p)
	}
	return f.Write(p)
}

// flush writes the gathered bytes.
func (f *bufferedFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.File.Write(f.buf)
	f.buf = f.buf[:0]
	return err
}

// WriteAt implements vfs.File.
func (f *bufferedFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// Read implements vfs.File.
func (f *bufferedFile) Read(p []byte) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

// ReadAt implements vfs.File.
func (f *bufferedFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// Stat implements vfs.File.
func (f *bufferedFile) Stat() (vfs.FileInfo, error) {
	if err := f.flush(); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

// Sync implements vfs.File.
func (f *bufferedFile) Sync() error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Sync()
}

// SyncData implements vfs.File.
func (f *bufferedFile) SyncData() error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.SyncData()
}

// SyncTo implements vfs.File.
func (f *bufferedFile) SyncTo(length int64) (bool, error) {
	if err := f.flush(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

// Close implements vfs.File. The gathered bytes are written first; the
// file is closed even if that fails, and the failure is returned.
func (f *bufferedFile) Close() error {
	err := f.flush()
	f.buf = nil
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
