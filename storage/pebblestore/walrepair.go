package pebblestore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
	"github.com/omnibusmq/omnibus/storage"
	"go.uber.org/zap"
)

// damagedDir is the directory, inside the data directory, where a repair
// keeps a copy of each log file it cut, for whoever wants to look.
const damagedDir = "omnibus-damaged"

// openAbort is what the replay check panics with to stop pebble.Open
// before it flushes what it replayed (after which the log file that shows
// the loss would be gone): Store.protect returns err.
type openAbort struct{ err error }

// repairHint ends the message of a refused start.
const repairHint = "omnibus refuses to start on it: start once with --repair to accept the loss " +
	"(a copy of the log file is kept in " + damagedDir + ")"

// onPebbleInfo watches Pebble's informational messages for the end of
// each log file's replay during Open, and checks that file (onReplayed).
func (s *Store) onPebbleInfo(format string, args []any) {
	if !strings.Contains(format, "stopped reading at offset") || len(args) < 3 {
		return
	}
	if off, ok := args[2].(wal.Offset); ok && off.PhysicalFile != "" {
		s.onReplayed(off.PhysicalFile)
	}
}

// onReplayed checks a log file Pebble has just replayed. If records that
// had been synced (so acknowledged) lie beyond where replay stopped, the
// open is stopped with an error wrapping storage.ErrCorrupt, unless the
// store was opened to repair, which keeps a copy of the file and goes on.
// The loss accepted is recorded in the store's mark first (acceptLoss).
// Unsynced records after the stop are what a crash leaves: they are
// dropped, and said so. A log that cannot be read for the check (a disk
// fault) stops the open too, with storage.ErrUnavailable, since nothing
// then tells whether acknowledged records were lost; with repair the open
// goes on, trusting what Pebble replayed.
func (s *Store) onReplayed(path string) {
	rep, err := checkWAL(s.fs, path, s.markFor(path))
	switch {
	case err != nil && !s.repair:
		panic(openAbort{fmt.Errorf("%w: cannot read the write-ahead log %s to check that no acknowledged record was lost: %v; "+
			"omnibus refuses to start on it: fix the disk, or start once with --repair to accept what could be replayed",
			storage.ErrUnavailable, path, err)})
	case err != nil:
		s.log.Warn("cannot check the write-ahead log Pebble replayed; accepting what was replayed (--repair)",
			zap.String("path", path), zap.Error(err))
		return
	}
	switch {
	case rep.damaged() && !s.repair:
		panic(openAbort{fmt.Errorf("%w: %v; %s", storage.ErrCorrupt, rep, repairHint)})
	case rep.damaged():
		kept := s.keepDamaged(path)
		if err := s.acceptLoss(rep); err != nil {
			panic(openAbort{fmt.Errorf("%w: %v", storage.ErrUnavailable, err)})
		}
		s.log.Warn("write-ahead log damaged; accepting the loss (--repair)",
			zap.Stringer("log", rep), zap.String("copy", kept))
	case rep.later > 0:
		s.log.Warn("write-ahead log ends with records that were never synced (a crash cut them): dropped",
			zap.Stringer("log", rep))
	}
}

// acceptLoss lowers the store's mark, durably, to where replay of the
// log rep reports on stops, if the mark names that log and says it was
// synced further: the open accepts the loss of the rest (--repair), and
// the next start must not be refused over it again, even after a power
// loss before the mark is next fsynced (see walMark). A mark naming
// another log is left as it is.
func (s *Store) acceptLoss(rep walReport) error {
	n, ok := walLogNum(rep.path)
	if !ok || !s.markOK || n != s.markLog || s.markSynced <= rep.stop {
		return nil
	}
	if err := s.mark.accept(n, rep.stop); err != nil {
		return fmt.Errorf("cannot record in %s that the loss of %s past offset %d is accepted: %w",
			walMarkName, rep.path, rep.stop, err)
	}
	s.markSynced = rep.stop
	return nil
}

// markFor returns how far the store's mark says the log at path was
// synced, or 0.
func (s *Store) markFor(path string) int64 {
	n, ok := walLogNum(path)
	if !ok || !s.markOK || n != s.markLog {
		return 0
	}
	return s.markSynced
}

// replayErrRE finds the log file and offset in the details of Pebble's
// error for a log it refuses to replay ("replaying wal 5, offset
// (db/000005.log: 99921)").
var replayErrRE = regexp.MustCompile(`replaying wal \d+, offset \((.+): (\d+)\)`)

// damagedLog returns the log file named in the details of an error of
// pebble.Open, or "".
func damagedLog(err error) string {
	m := replayErrRE.FindStringSubmatch(fmt.Sprintf("%+v", err))
	if m == nil {
		return ""
	}
	if _, err := strconv.ParseInt(m[2], 10, 64); err != nil {
		return ""
	}
	return m[1]
}

// repairLog cuts a damaged log file where its replay stops and ends it
// cleanly (Pebble's end-of-file trailer), keeping a copy of the whole
// file first, so that Pebble replays what precedes the damage and goes on
// with the logs after it. The mark is lowered (acceptLoss) before the
// file is cut: a crash in between leaves the damaged file, which Pebble
// refuses whatever the mark says, and once the file is cut no crash
// leaves it with the old mark to be refused again. (Left there, the old
// mark also made the open that follows report the cut file as damaged
// and copy it over the copy of the whole file.)
func (s *Store) repairLog(rep walReport) error {
	data, err := readFile(s.fs, rep.path)
	if err != nil {
		return err
	}
	kept := s.keepDamaged(rep.path)
	if kept == "" {
		return fmt.Errorf("cannot keep a copy of %s before repairing it", rep.path)
	}
	if err := s.acceptLoss(rep); err != nil {
		return err
	}
	logNum, _ := walLogNum(rep.path)
	fixed := append([]byte(nil), data[:rep.stop]...)
	if rest := walBlockSize - len(fixed)%walBlockSize; rest < walRecycleHeader {
		fixed = append(fixed, make([]byte, rest)...) // a header never straddles blocks
	}
	var trailer [walRecycleHeader]byte // checksum 0, length 0
	trailer[6] = walRecycleFullEnc
	putUint32(trailer[7:], logNum+1) // the next log's number: end of file
	fixed = append(fixed, trailer[:]...)
	tmp := rep.path + ".repair"
	if err := writeSynced(s.fs, tmp, fixed); err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, rep.path); err != nil {
		return err
	}
	s.log.Warn("write-ahead log repaired: cut where replay stops; the records after it are lost",
		zap.Stringer("log", rep), zap.String("copy", kept))
	return syncDir(s.fs, s.dir)
}

// keepDamaged copies a damaged log file into damagedDir and returns the
// copy's path, or "" if it could not.
func (s *Store) keepDamaged(path string) string {
	data, err := readFile(s.fs, path)
	dir := s.fs.PathJoin(s.dir, damagedDir)
	if err == nil {
		err = s.fs.MkdirAll(dir, 0o755)
	}
	var dst string
	if err == nil {
		dst = freeName(s.fs, s.fs.PathJoin(dir, fmt.Sprintf("%s.%s", baseName(path), time.Now().UTC().Format("20060102T150405Z"))))
		err = writeSynced(s.fs, dst, data)
	}
	if err == nil {
		err = syncDir(s.fs, dir)
	}
	if err != nil {
		s.log.Error("cannot keep a copy of a damaged write-ahead log", zap.String("path", path), zap.Error(err))
		return ""
	}
	return dst
}

// freeName returns name, or name.2, name.3, ... the first that Stat does
// not find (or cannot tell: the write that follows reports that disk's
// error): copies kept within the same second never overwrite each other.
func freeName(fs vfs.FS, name string) string {
	for i, try := 2, name; ; i++ {
		if _, err := fs.Stat(try); err != nil {
			return try
		}
		try = fmt.Sprintf("%s.%d", name, i)
	}
}

// writeSynced writes data to a new file at path and syncs it.
func writeSynced(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes the directory's entries durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func putUint32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
