package pebblestore

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The write-ahead log's format (Pebble's record package): 32 KiB blocks of
// chunks. A chunk's header holds a checksum (4 bytes, of everything after
// it), the payload's length (2), its encoding (1), then for the
// "recyclable" encodings the log's number (4) and for the "WAL sync"
// encodings also how far the log had been synced when the chunk was
// written (8). A record is one full chunk, or a first chunk, middle chunks
// and a last chunk. A block's tail too short for a header is zeros.
const (
	walBlockSize      = 32 << 10
	walLegacyHeader   = 7
	walRecycleHeader  = 11
	walSyncHeader     = 19
	walMaxEncoding    = 12
	walRecycleFullEnc = 5 // also the end-of-file trailer's encoding
	walSyncFirstEnc   = 9
)

// walChunkPosition returns whether a chunk encoding begins a record,
// ends one, or both.
func walChunkPosition(enc byte) (first, last bool) {
	switch (enc - 1) % 4 {
	case 0:
		return true, true // full
	case 1:
		return true, false // first
	case 2:
		return false, false // middle
	}
	return false, true // last
}

// walHeaderSize is the header length of a chunk encoding.
func walHeaderSize(enc byte) int {
	switch {
	case enc >= walSyncFirstEnc:
		return walSyncHeader
	case enc >= walRecycleFullEnc:
		return walRecycleHeader
	}
	return walLegacyHeader
}

// walReport is what the store finds reading a write-ahead log file.
type walReport struct {
	path string
	size int64
	// stop is where replay stops: the start of the first record that
	// cannot be read whole (size if none).
	stop int64
	// validEnd is the end of the chunks that read correctly one after the
	// other from the start of the file.
	validEnd int64
	// clean: the log ends with Pebble's end-of-file trailer.
	clean bool
	// later is how many chunks of this log read correctly after validEnd,
	// and laterEnd where the last of them ends.
	later    int
	laterEnd int64
	// synced is the highest offset known to have been synced: from the
	// chunks after validEnd, or from the store's own mark (see walMark).
	// Any synced byte past validEnd was acknowledged and is lost.
	synced int64
	// markSynced is the mark's part of synced (0: none).
	markSynced int64
	// lastClaim is the synced offset the last valid chunk before validEnd
	// carries, and laterSyncs how many syncs the chunks after validEnd
	// show completed since (distinct synced offsets above lastClaim).
	lastClaim  int64
	laterSyncs int
}

// damaged reports whether data that had been synced, so acknowledged, is
// missing or unreadable. Either a chunk after the damage, or the store's
// mark, says the log was synced past it; or the chunks after it show
// three syncs completed after the damaged chunk was written. (Pebble
// writes a chunk's synced offset low, so the first test alone misses
// damage in the last few kilobytes. Syncs run one after the other, each
// covering all that was written before it began: the second sync seen
// after the damaged chunk completed after it was written, so the third
// began after, and covered it.)
func (r walReport) damaged() bool { return r.synced > r.validEnd || r.laterSyncs >= 3 }

// dropped is how many bytes of the log replay leaves out: up to the last
// readable chunk or the synced mark, whichever is further.
func (r walReport) dropped() int64 { return max(r.laterEnd, r.synced, r.validEnd) - r.stop }

func (r walReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "write-ahead log %s (%d bytes): replay stops at offset %d", r.path, r.size, r.stop)
	switch {
	case r.synced > r.validEnd:
		fmt.Fprintf(&b, ", but it had been synced up to offset %d", r.synced)
		if r.markSynced > 0 && r.markSynced == r.synced {
			b.WriteString(" (recorded by omnibus)")
		} else {
			b.WriteString(" (said by the records after the damage)")
		}
	case r.damaged():
		fmt.Fprintf(&b, ", but the records after it show %d syncs made after the damaged one was written", r.laterSyncs)
	}
	if r.later > 0 {
		fmt.Fprintf(&b, "; %d readable chunks follow the damage", r.later)
	}
	fmt.Fprintf(&b, "; %d bytes dropped", r.dropped())
	return b.String()
}

// walLogNum returns the log number in a log file's name (000012.log).
func walLogNum(path string) (uint32, bool) {
	name, ok := strings.CutSuffix(baseName(path), ".log")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(name, 10, 64)
	return uint32(n), err == nil
}

// checkWAL reads the log file at path and reports where replay stops and
// whether synced data lies beyond it. markSynced is how far the store last
// recorded this log as synced (0 if unknown).
func checkWAL(fs vfs.FS, path string, markSynced int64) (walReport, error) {
	logNum, ok := walLogNum(path)
	if !ok {
		return walReport{}, fmt.Errorf("%s is not a write-ahead log file", path)
	}
	data, err := readFile(fs, path)
	if err != nil {
		return walReport{}, err
	}
	r := walkWAL(data, logNum)
	r.path = path
	r.later, r.laterEnd, r.synced, r.laterSyncs = scanLater(data, logNum, r.validEnd, r.lastClaim)
	if markSynced > r.synced {
		r.synced, r.markSynced = markSynced, markSynced
	}
	return r, nil
}

// readFile reads a whole file.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return data, nil
}

// walkWAL follows the chunks of a log from its start, as Pebble's reader
// does, up to the first that is not valid or the end-of-file trailer.
func walkWAL(data []byte, logNum uint32) walReport {
	r := walReport{size: int64(len(data))}
	off, recStart := 0, -1
	end := func(stop int) walReport {
		r.validEnd = int64(off)
		r.stop = int64(stop)
		if recStart >= 0 {
			r.stop = int64(recStart)
		}
		return r
	}
	for {
		blockEnd := min((off/walBlockSize+1)*walBlockSize, len(data))
		if off+walLegacyHeader > blockEnd {
			if blockEnd == len(data) {
				return end(off)
			}
			off = blockEnd // a block's zeroed tail
			continue
		}
		h := data[off:]
		checksum, length, enc := binary.LittleEndian.Uint32(h), int(binary.LittleEndian.Uint16(h[4:])), h[6]
		if checksum == 0 && length == 0 && enc == 0 {
			if blockEnd-off < walSyncHeader && allZero(data[off:blockEnd]) {
				off = blockEnd
				continue
			}
			return end(off)
		}
		if enc == 0 || enc > walMaxEncoding {
			return end(off)
		}
		hs := walHeaderSize(enc)
		if off+hs > blockEnd {
			return end(off)
		}
		if hs > walLegacyHeader {
			n := binary.LittleEndian.Uint32(h[7:])
			if n == logNum+1 && recStart < 0 && enc == walRecycleFullEnc && length == 0 {
				off += hs
				r.clean = true
				return end(off - hs)
			}
			if n != logNum {
				return end(off)
			}
		}
		chunkEnd := off + hs + length
		if chunkEnd > blockEnd || checksum != maskedCRC(data[off+6:chunkEnd]) {
			return end(off)
		}
		if hs == walSyncHeader {
			r.lastClaim = int64(binary.LittleEndian.Uint64(h[11:]))
		}
		first, last := walChunkPosition(enc)
		switch {
		case recStart < 0 && first && !last:
			recStart = off
		case recStart < 0 && !first:
			// a continuation with no start: Pebble's reader skips it
		case recStart >= 0 && first:
			return end(off)
		case recStart >= 0 && last:
			recStart = -1
		}
		off = chunkEnd
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scanLater looks at every offset after from for a valid "WAL sync" chunk
// of this log: a chunk whose checksum holds and that carries the log's
// number. It returns how many it found, where the last ends, the highest
// synced offset they carry, and how many distinct synced offsets above
// since they carry.
func scanLater(data []byte, logNum uint32, from, since int64) (n int, end, synced int64, syncs int) {
	seen := map[int64]bool{}
	for i := int(from); i+walSyncHeader <= len(data); i++ {
		enc := data[i+6]
		if enc < walSyncFirstEnc || enc > walMaxEncoding || binary.LittleEndian.Uint32(data[i+7:]) != logNum {
			continue
		}
		chunkEnd := i + walSyncHeader + int(binary.LittleEndian.Uint16(data[i+4:]))
		blockEnd := (i/walBlockSize + 1) * walBlockSize
		if chunkEnd > len(data) || chunkEnd > blockEnd || binary.LittleEndian.Uint32(data[i:]) != maskedCRC(data[i+6:chunkEnd]) {
			continue
		}
		n++
		end = int64(chunkEnd)
		claim := int64(binary.LittleEndian.Uint64(data[i+11:]))
		synced = max(synced, claim)
		if claim > since && !seen[claim] {
			seen[claim] = true
			syncs++
		}
		i = chunkEnd - 1
	}
	return n, end, synced, syncs
}
