package raftstore

import (
	"path/filepath"

	"go.uber.org/zap"
)

// spareName is a segment file compaction freed, kept to be written over
// as the next segment.
const spareName = "spare.tmp"

// Recycling segment files. A file preallocated with fallocate is made of
// unwritten extents: the first write into each block changes them, so the
// fdatasync after it must commit that change to the file system's
// journal. Measured on ext4 (2,000 writes of 16 KiB, each followed by
// fdatasync), that costs as much as a file growing as it is written:
// 163-225 us and 82-122 us of CPU per write+fdatasync, against 105-114 us
// and 58-64 us writing over blocks already written. So compaction does
// not delete the oldest segment it frees while no spare is kept: it
// renames it spare.tmp, and the next segment is that file, written over
// from its start. Its old records do not read as records of the new
// segment: a record's header checksum covers the segment's number and the
// record's offset. (Writing each new segment full of zeros ahead of need
// would do the same for fdatasync, but doubles the log's writes: tried,
// in the cluster benchmark it was no faster and its tail was worse.)

// retire removes segment s, which compaction freed, or keeps it as the
// spare if there is none.
func (ls *logStore) retire(s *segment) error {
	if !ls.hasSpare {
		if err := ls.fs.Rename(s.path, filepath.Join(ls.dir, spareName)); err == nil {
			ls.hasSpare = true
			return nil
		}
	}
	return ls.fs.Remove(s.path)
}

// takeSpare renames the spare to path and opens it, returning it with
// its size; nil when there is none (or it cannot be used: the caller
// then creates the segment).
func (ls *logStore) takeSpare(path string) (logFile, int64) {
	if !ls.hasSpare {
		return nil, 0
	}
	ls.hasSpare = false
	spare := filepath.Join(ls.dir, spareName)
	if err := ls.fs.Rename(spare, path); err != nil {
		ls.log.Warn("cannot reuse a compacted raft log segment; creating a new one", zap.Error(err))
		_ = ls.fs.Remove(spare)
		return nil, 0
	}
	f, err := ls.fs.OpenRW(path)
	if err != nil {
		ls.log.Warn("cannot reuse a compacted raft log segment; creating a new one", zap.Error(err))
		return nil, 0
	}
	size, err := f.Size()
	if err == nil && size < ls.segBytes {
		err = f.Allocate(ls.segBytes)
		size = ls.segBytes
	}
	if err != nil {
		f.Close()
		ls.log.Warn("cannot reuse a compacted raft log segment; creating a new one", zap.Error(err))
		return nil, 0
	}
	return f, size
}
