package raftstore

import (
	"path/filepath"
	"sync/atomic"

	"go.uber.org/zap"
)

// spareName is the segment file prepared ahead of need.
const spareName = "spare.tmp"

// spareSegment is the next segment file, prepared in the background:
// written full of zeros and fsynced, so that the log's fdatasyncs
// into it carry no metadata. (A file only preallocated with fallocate
// is made of unwritten extents: the first write into each block changes
// them, and the fdatasync after it must commit that to the file system's
// journal; measured on ext4, that doubles an fdatasync's time and CPU.)
// At rotation it is renamed into place.
type spareSegment struct {
	done   chan struct{} // closed when preparation ended
	f      logFile       // the prepared file, if err is nil
	err    error
	cancel atomic.Bool // close asks the preparation to stop
}

// prepareSpare starts preparing a spare segment, unless one is on its way.
func (ls *logStore) prepareSpare() {
	if ls.spare != nil || ls.noSpare {
		return
	}
	sp := &spareSegment{done: make(chan struct{})}
	ls.spare = sp
	path := filepath.Join(ls.dir, spareName)
	fs, size := ls.fs, ls.segBytes
	go func() {
		defer close(sp.done)
		f, err := fs.Create(path)
		if err != nil {
			sp.err = err
			return
		}
		if err := zeroFill(f, size, &sp.cancel); err != nil {
			f.Close()
			_ = fs.Remove(path)
			sp.err = err
			return
		}
		sp.f = f
	}()
}

// zeroFill writes size bytes of zeros into f and syncs them, unless
// cancel is set meanwhile.
func zeroFill(f logFile, size int64, cancel *atomic.Bool) error {
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if cancel != nil && cancel.Load() {
			return errSpareCancelled
		}
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Datasync()
}

// takeSpare renames a prepared spare to path and returns it, or nil when
// none is ready (the caller creates the segment itself).
func (ls *logStore) takeSpare(path string) logFile {
	sp := ls.spare
	if sp == nil {
		return nil
	}
	select {
	case <-sp.done:
	default:
		return nil // still being written: the next rotation takes it
	}
	ls.spare = nil
	if sp.err != nil {
		ls.log.Warn("could not prepare the next raft log segment; creating it in place", zap.Error(sp.err))
		return nil
	}
	if err := ls.fs.Rename(filepath.Join(ls.dir, spareName), path); err != nil {
		sp.f.Close()
		ls.log.Warn("could not rename the prepared raft log segment; creating it in place", zap.Error(err))
		return nil
	}
	return sp.f
}

// stopSpare stops a preparation under way and waits for it; the spare
// file stays for the next open to remove.
func (ls *logStore) stopSpare() {
	if sp := ls.spare; sp != nil {
		sp.cancel.Store(true)
		<-sp.done
		if sp.f != nil {
			sp.f.Close()
		}
		ls.spare = nil
	}
}

type spareError string

func (e spareError) Error() string { return string(e) }

const errSpareCancelled = spareError("cancelled")
