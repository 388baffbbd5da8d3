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
// mark does. It is rewritten (in place, one fsync) at most once per
// walMarkInterval while the log grows, and when the store closes, so a
// log cut after a clean close is always caught, and one cut after a crash
// unless the cut is within the last interval's writes.
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

	mu      sync.Mutex // guards the fields below
	logNum  uint32
	synced  int64
	written struct {
		logNum uint32
		synced int64
	}
	stop chan struct{} // closed to stop the writer
	done chan struct{} // closed when the writer stopped
}

// noteSynced records that log logNum is synced up to n bytes.
func (m *walMark) noteSynced(logNum uint32, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if logNum > m.logNum || (logNum == m.logNum && n > m.synced) {
		m.logNum, m.synced = logNum, n
	}
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

// start runs the writer until stopAndWrite.
func (m *walMark) start() {
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

// stopWriter stops the writer, if it was started.
func (m *walMark) stopWriter() {
	if m.stop != nil {
		close(m.stop)
		<-m.done
		m.stop = nil
	}
}

// write writes the mark if it changed. A failure (a full disk) is logged
// at Debug and tried again next time: the mark is a check, not data.
func (m *walMark) write() {
	m.mu.Lock()
	logNum, synced := m.logNum, m.synced
	same := logNum == m.written.logNum && synced == m.written.synced
	m.mu.Unlock()
	if same || logNum == 0 {
		return
	}
	var b [walMarkLen]byte
	copy(b[:], walMarkMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(logNum))
	binary.LittleEndian.PutUint64(b[16:], uint64(synced))
	binary.LittleEndian.PutUint32(b[24:], maskedCRC(b[:24]))
	if err := m.writeFile(b[:]); err != nil {
		m.log.Debug("cannot write the write-ahead log's synced mark", zap.Error(err))
		return
	}
	m.mu.Lock()
	m.written.logNum, m.written.synced = logNum, synced
	m.mu.Unlock()
}

// writeFile overwrites the mark in place and syncs it. The file is created
// (and its directory synced) once; later writes need no new block.
func (m *walMark) writeFile(b []byte) error {
	_, statErr := m.fs.Stat(m.path)
	f, err := m.fs.OpenReadWrite(m.path, vfs.WriteCategoryUnspecified)
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
	if err := f.Close(); err != nil {
		return err
	}
	if statErr != nil { // just created: make its name durable too
		return syncDir(m.fs, m.fs.PathDir(m.path))
	}
	return nil
}
