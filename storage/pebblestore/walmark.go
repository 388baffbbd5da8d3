package pebblestore

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// walMark records, in a small file beside the database, how far the
// current write-ahead log has been synced. A log cut short loses records
// that were acknowledged, and nothing in what is left of it shows it: the
// mark does.
//
// The mark is rewritten in place (one pwrite of 32 bytes, no fsync) after
// every fsync of the log, before the commits it covers are acknowledged,
// so that a crash of the process never leaves an acknowledged record
// beyond it: a log cut afterwards, by whatever means, is caught. The mark
// is fsynced once per walMarkInterval while it changes, and when the store
// closes, so that a crash of the machine leaves it at most that far
// behind. (Fsyncing it with every commit would double the fsyncs a send
// costs.)
//
// Only the fsyncs of the store's own log files move the mark: the files
// named NNNNNN.log in the store's directory, and the synced length is
// what the store wrote to that file, never the file's size. A checkpoint
// writes a copy of the live log (whole, as Pebble copies it) into its
// own directory: its length is not the live log's synced length, and
// when Pebble reuses an old log file for the live log it is far longer
// (the old log's bytes stay behind the new records). Counting that copy
// made the store refuse to start after a checkpoint, after a clean close
// as after a power loss, with nothing lost.
//
// So whatever a crash keeps of the mark (the value last fsynced, or any
// value written since) is at most what the named log file had durably
// when that value was written, and a log file's synced bytes are never
// rewritten: no crash, of the process or the machine, leaves the mark
// beyond what its log holds. A switch of log moves the mark only with the
// new log's first fsync, after the old log's last one (Pebble closes a log
// before it creates or reuses the next). TestNoCrashPointLeavesTheMarkBeyondTheLog
// takes crash images at each of these moments, with none, half or all of
// the unsynced data kept; a mark written before its fsync, or a
// checkpoint's copy counted, makes it fail.
//
// A start with repair that accepts the loss of the end of the log the
// mark names (Store.acceptLoss) lowers the mark to where that log's
// replay stops, and fsyncs it, before the open goes on: the mark then
// agrees with what is left of the log, and a power loss before the open
// has flushed what it replayed (after which Pebble never replays that log
// again) no longer leaves the older, longer mark on disk to refuse the
// next start over a loss already accepted. TestPowerLossAfterARepairedStartOpens
// takes that crash image.
//
// The file's 32 bytes: a magic string (8), the log's number (8), the
// synced length (8), a checksum of those (4), zeros (4).
const (
	walMarkName     = "OMNIBUS-WAL-SYNCED"
	walMarkMagic    = "omniwal1"
	walMarkLen      = 32
	walMarkInterval = time.Second
)

// walMark tracks the synced length of the log and writes it down.
type walMark struct {
	fs   vfs.FS // not the store's faultFS: the mark is the store's own
	path string
	log  *zap.Logger

	mu sync.Mutex // guards the fields below
	// f is the mark file, open from start until stopWriter; nil when it
	// could not be opened (the mark is then written once per interval).
	f       vfs.File
	logNum  uint32
	synced  int64
	written struct { // what the file holds
		logNum uint32
		synced int64
	}
	fsynced struct { // what the file held when it was last fsynced
		logNum uint32
		synced int64
	}
	failing bool          // the last write of the mark failed (logged once)
	stop    chan struct{} // closed to stop the writer
	done    chan struct{} // closed when the writer stopped
	buf     [walMarkLen]byte
}

// noteSynced records that log logNum is synced up to n bytes, and writes
// it into the mark file (without an fsync) if the file is open. It is
// called by the log's writer right after the fsync, before the commits
// the fsync covers are acknowledged.
func (m *walMark) noteSynced(logNum uint32, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if logNum > m.logNum || (logNum == m.logNum && n > m.synced) {
		m.logNum, m.synced = logNum, n
	}
	if m.f != nil {
		m.writeLocked()
	}
}

// writeLocked writes the mark into the open file if it changed. A failure
// (a full or failing disk) is logged once and tried again next time: the
// mark is a check, not data.
func (m *walMark) writeLocked() {
	if m.logNum == m.written.logNum && m.synced == m.written.synced {
		return
	}
	encodeMark(&m.buf, m.logNum, m.synced)
	if _, err := m.f.WriteAt(m.buf[:], 0); err != nil {
		if !m.failing {
			m.log.Warn("cannot write the write-ahead log's synced mark; a log cut short may go unnoticed", zap.Error(err))
		}
		m.failing = true
		return
	}
	m.failing = false
	m.written.logNum, m.written.synced = m.logNum, m.synced
}

// accept makes the mark say, durably, that log logNum is synced up to n
// bytes, and holds that as what the file says, written and fsynced, so
// that the writer never writes an older value back. It is called during
// the open, before start: no writer runs.
func (m *walMark) accept(logNum uint32, n int64) error {
	var b [walMarkLen]byte
	encodeMark(&b, logNum, n)
	if err := m.writeFile(b[:]); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logNum, m.synced = logNum, n
	m.written.logNum, m.written.synced = logNum, n
	m.fsynced = m.written
	return nil
}

// encodeMark fills b with the mark for log logNum synced up to synced.
func encodeMark(b *[walMarkLen]byte, logNum uint32, synced int64) {
	*b = [walMarkLen]byte{}
	copy(b[:], walMarkMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(logNum))
	binary.LittleEndian.PutUint64(b[16:], uint64(synced))
	binary.LittleEndian.PutUint32(b[24:], maskedCRC(b[:24]))
}

// read returns the log number and synced length the mark holds, or ok
// false if there is no valid mark.
func (m *walMark) read() (logNum uint32, synced int64, ok bool) {
	data, err := readFile(m.fs, m.path)
	if err != nil || len(data) != walMarkLen || string(data[:8]) != walMarkMagic ||
		binary.LittleEndian.Uint32(data[24:]) != maskedCRC(data[:24]) {
		return 0, 0, false
	}
	return uint32(binary.LittleEndian.Uint64(data[8:])), int64(binary.LittleEndian.Uint64(data[16:])), true
}

// start opens the mark file, writes what is known so far and runs the
// writer, which fsyncs the mark once per walMarkInterval, until
// stopWriter.
func (m *walMark) start() {
	f, err := m.open()
	m.mu.Lock()
	if err != nil {
		m.log.Warn("cannot open the write-ahead log's synced mark; it is written once a second instead", zap.Error(err))
	} else {
		m.f = f
		m.writeLocked()
	}
	m.mu.Unlock()
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(walMarkInterval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.write()
			}
		}
	}()
}

// open opens the mark file for writing, creating it (and making its name
// durable) if it is not there.
func (m *walMark) open() (vfs.File, error) {
	_, statErr := m.fs.Stat(m.path)
	f, err := m.fs.OpenReadWrite(m.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	if statErr != nil { // just created: make its name durable too
		if err := syncDir(m.fs, m.fs.PathDir(m.path)); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return f, nil
}

// stopWriter stops the writer, if it was started, and closes the file.
func (m *walMark) stopWriter() {
	if m.stop != nil {
		close(m.stop)
		<-m.done
		m.stop = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f != nil {
		_ = m.f.Close()
		m.f = nil
	}
}

// write makes the mark durable: it writes it if it changed and fsyncs the
// file if it changed since the last fsync. With the file open (see start)
// the fsync runs without the lock, so that the log's writer, which writes
// the mark after each of its fsyncs, does not wait for it; otherwise the
// file is opened for the write.
func (m *walMark) write() {
	m.mu.Lock()
	f := m.f
	if f != nil {
		m.writeLocked()
	}
	logNum, synced := m.logNum, m.synced
	if f != nil {
		logNum, synced = m.written.logNum, m.written.synced
	}
	same := logNum == m.fsynced.logNum && synced == m.fsynced.synced
	m.mu.Unlock()
	if same || logNum == 0 {
		return
	}
	var err error
	if f != nil {
		err = f.Sync()
	} else {
		var b [walMarkLen]byte
		encodeMark(&b, logNum, synced)
		err = m.writeFile(b[:])
	}
	if err != nil {
		m.log.Debug("cannot write the write-ahead log's synced mark", zap.Error(err))
		return
	}
	m.mu.Lock()
	m.fsynced.logNum, m.fsynced.synced = logNum, synced
	if f == nil {
		m.written = m.fsynced
	}
	m.mu.Unlock()
}

// writeFile overwrites the mark in place and syncs it. The file is created
// (and its directory synced) once; later writes need no new block.
func (m *walMark) writeFile(b []byte) error {
	f, err := m.open()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// lag returns, for the current log, how far it is synced, how far the
// mark file says so and how far the mark file was fsynced saying so (for
// BenchmarkWALMarkBlindSpot).
func (m *walMark) lag() (synced, written, fsynced int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written.logNum == m.logNum {
		written = m.written.synced
	}
	if m.fsynced.logNum == m.logNum {
		fsynced = m.fsynced.synced
	}
	return m.synced, written, fsynced
}
