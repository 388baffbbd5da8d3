package raftstore

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// logFS is what the segment log needs of the file system. The node uses
// osLogFS; tests wrap it to inject disk faults (seglog_fault_test.go).
type logFS interface {
	// Create creates (or truncates) a file for reading and writing.
	Create(path string) (logFile, error)
	// OpenRW opens an existing file for reading and writing.
	OpenRW(path string) (logFile, error)
	Remove(path string) error
	Rename(oldpath, newpath string) error
	MkdirAll(dir string) error
	// ReadDir lists the names in dir.
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the directory's entries (creations, removals,
	// renames) durable.
	SyncDir(dir string) error
}

// logFile is an open segment file.
type logFile interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	// WritevAt writes bufs one after another from off (pwritev), as
	// WriteAt would their concatenation. It may change bufs.
	WritevAt(bufs [][]byte, off int64) (int, error)
	// Datasync makes the written data durable (fdatasync).
	Datasync() error
	// Allocate reserves the file's blocks up to size (fallocate), so that
	// writes within it neither fail for lack of space nor grow the file.
	Allocate(size int64) error
	Size() (int64, error)
	Close() error
}

// osLogFS is the real file system.
type osLogFS struct{}

func (osLogFS) Create(path string) (logFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osLogFile{f}, nil
}

func (osLogFS) OpenRW(path string) (logFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osLogFile{f}, nil
}

func (osLogFS) Remove(path string) error                     { return os.Remove(path) }
func (osLogFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osLogFS) MkdirAll(dir string) error                    { return os.MkdirAll(dir, 0o755) }
func (osLogFS) SyncDir(dir string) error                     { return syncDir(dir) }
func (osLogFS) ReadDir(dir string) ([]string, error)         { return readDirNames(dir) }
func (f osLogFile) Datasync() error                          { return unix.Fdatasync(int(f.Fd())) }
func (f osLogFile) WriteAt(p []byte, off int64) (int, error) { return f.File.WriteAt(p, off) }

// osLogFile is an *os.File with fdatasync, fallocate and pwritev.
type osLogFile struct{ *os.File }

// maxIOV is how many buffers one pwritev takes (Linux's IOV_MAX).
const maxIOV = 1024

// WritevAt writes bufs with pwritev, maxIOV at a time, going on after a
// short write from where it stopped.
func (f osLogFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for bufs = dropWritten(bufs, 0); len(bufs) > 0; {
		n, err := unix.Pwritev(int(f.Fd()), bufs[:min(len(bufs), maxIOV)], off)
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			total += n
			off += int64(n)
		}
		if err != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		bufs = dropWritten(bufs, n)
	}
	return total, nil
}

// dropWritten returns what is left of bufs once their first n bytes are
// written, from its first byte (no empty buffer first). It may change
// bufs's first buffer left.
func dropWritten(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && (n > 0 || len(bufs[0]) == 0) {
		if n < len(bufs[0]) {
			bufs[0] = bufs[0][n:]
			return bufs
		}
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	return bufs
}

// Allocate preallocates with fallocate; a file system that cannot
// (EOPNOTSUPP) grows the file as it is written instead.
func (f osLogFile) Allocate(size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}

func (f osLogFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// copyFile copies src to dst (fsynced), for keeping a damaged segment.
func copyFile(fs logFS, src, dst string) error {
	in, err := fs.OpenRW(src)
	if err != nil {
		return err
	}
	defer in.Close()
	size, err := in.Size()
	if err != nil {
		return err
	}
	out, err := fs.Create(dst)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		n, rerr := in.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n > 0 {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				out.Close()
				return err
			}
			off += int64(n)
		}
		if rerr != nil && off < size {
			out.Close()
			return rerr
		}
	}
	if err := out.Datasync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(dst))
}
