package raftstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The Raft log is a sequence of segment files in raftlog/, named by a
// sequence number (0000000000000001.seg, ...), each a sequence of records
// from its start (DESIGN.md, "Where things live on disk"). A record is
//
//	[0:4]   CRC-32C of the header: the node id, the segment's number and
//	        the record's offset (8 bytes each, not stored), then [4:24]
//	[4:8]   payload length
//	[8]     type
//	[9:12]  the Raft group whose record it is, in the log the data groups
//	        of a node share (sharedlog.go); zero in a group's own log
//	[12:16] CRC-32C of the payload
//	[16:24] synced: how far the segment had been fdatasynced when the
//	        record was written
//	[24:]   payload, then zeros up to a multiple of 8 bytes
//
// Binding the header's checksum to the node, the file and the offset
// means that a record's bytes found anywhere else (a torn write's
// leftovers, a message body that happens to hold a record) do not read
// as a record. synced is what tells a crash's torn write from damage:
// a record written after the damaged one had been made durable says so.
const (
	recHeaderLen = 24
	recAlign     = 8
)

// recType is the type of a record.
type recType byte

const (
	// recSegment opens every segment: the node id, the segment's number,
	// and where the previous segment's trusted data ends.
	recSegment recType = 1 + iota
	// recEntry is one Raft log entry. An entry whose index is at or below
	// the last one read replaces it and everything after it (a new
	// leader overwrote our uncommitted tail).
	recEntry
	// recHardState is Raft's HardState; the latest wins.
	recHardState
	// recSnapshot is the metadata of a snapshot the log was compacted to;
	// the entries before it stay (the catch-up margin).
	recSnapshot
	// recInstall is the metadata of a snapshot received from the leader:
	// every entry read before it is void.
	recInstall
	// recDrop says the group left the node (a replica moved away): its
	// records before it are void.
	recDrop
)

// maxTag bounds the group a record names (three bytes of its header).
const maxTag = 1<<24 - 1

func (t recType) String() string {
	switch t {
	case recSegment:
		return "segment header"
	case recEntry:
		return "entry"
	case recHardState:
		return "hard state"
	case recSnapshot:
		return "snapshot"
	case recInstall:
		return "installed snapshot"
	case recDrop:
		return "group dropped"
	}
	return "type " + strconv.Itoa(int(t))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordLen is the length on disk of a record with n bytes of payload.
func recordLen(n int) int64 {
	return int64(recHeaderLen+n+recAlign-1) &^ (recAlign - 1)
}

// headerCRC is the checksum of a record header at off in segment seq of
// node id.
func headerCRC(id, seq uint64, off int64, h []byte) uint32 {
	var prefix [24]byte
	binary.LittleEndian.PutUint64(prefix[0:], id)
	binary.LittleEndian.PutUint64(prefix[8:], seq)
	binary.LittleEndian.PutUint64(prefix[16:], uint64(off))
	c := crc32.Update(0, castagnoli, prefix[:])
	return crc32.Update(c, castagnoli, h[4:recHeaderLen])
}

// recordWriter lays records out in a buffer that will be written at
// offset base of segment seq, except the Data of entries of at least
// gatherMinBytes: those are written from where they are (pieces), not
// copied into the buffer first.
type recordWriter struct {
	id, seq uint64
	base    int64
	synced  int64
	buf     []byte
	tag     uint64 // the group of the records added (shared log)
	// gathered are the entries' Data written from where they are, in
	// order; gatheredBytes their length.
	gathered      []gatheredData
	gatheredBytes int
}

// gatheredData is an entry's Data that goes, in the write, before the
// buffer's bytes from at on.
type gatheredData struct {
	at   int
	data []byte
}

// gatherMinBytes is the least Data an entry's record writes from where it
// is rather than copied into the write's buffer. Each copied byte was read
// and written once more before the kernel copied it again: entries'
// encoding into records (MarshalToSizedBuffer) was ~6 % of a one-group
// follower's CPU (storage/raftstore/RESULTS.md, 2026-12-03). Below this a
// piece of its own costs the kernel more than the copy saves.
const gatherMinBytes = 512

// size is the length of what the writer holds: the buffer and the
// gathered Data.
func (w *recordWriter) size() int { return len(w.buf) + w.gatheredBytes }

// reset empties the writer for a write at base of segment seq, keeping its
// buffers but no Data.
func (w *recordWriter) reset(seq uint64, base, synced int64) {
	w.seq, w.base, w.synced = seq, base, synced
	w.buf = w.buf[:0]
	clear(w.gathered)
	w.gathered, w.gatheredBytes = w.gathered[:0], 0
}

// pieces appends to dst what the writer holds, in file order: the
// buffer's bytes with the gathered Data between them.
func (w *recordWriter) pieces(dst [][]byte) [][]byte {
	from := 0
	for _, g := range w.gathered {
		if g.at > from {
			dst = append(dst, w.buf[from:g.at])
		}
		dst = append(dst, g.data)
		from = g.at
	}
	if from < len(w.buf) {
		dst = append(dst, w.buf[from:])
	}
	return dst
}

// add appends a record of typ whose payload, of size bytes, fill writes:
// every byte of it (the buffer is reused: what fill leaves holds an
// earlier record's bytes). Only the header and the padding are cleared,
// not the payload: an entry's bytes were written twice, zeros first.
func (w *recordWriter) add(typ recType, size int, fill func(p []byte) error) error {
	pos, start := w.size(), len(w.buf)
	n := int(recordLen(size))
	w.buf = slices.Grow(w.buf, n)[:start+n]
	rec := w.buf[start : start+n]
	clear(rec[:recHeaderLen])
	clear(rec[recHeaderLen+size:])
	payload := rec[recHeaderLen : recHeaderLen+size]
	if err := fill(payload); err != nil {
		w.buf = w.buf[:start]
		return err
	}
	w.seal(rec, typ, size, crc32.Checksum(payload, castagnoli), pos)
	return nil
}

// addEntry appends e's record, its Data gathered when of at least
// gatherMinBytes: the same bytes as addProto(recEntry, e) writes.
func (w *recordWriter) addEntry(e *pb.Entry) error {
	if len(e.Data) < gatherMinBytes {
		return w.addProto(recEntry, e)
	}
	// The encoding of e up to its Data's bytes: gogoproto writes Type,
	// Term and Index, then Data's tag and length.
	head := pb.Entry{Type: e.Type, Term: e.Term, Index: e.Index}
	headLen := head.Size()
	var dataLen [binary.MaxVarintLen64]byte
	lenLen := binary.PutUvarint(dataLen[:], uint64(len(e.Data)))
	prefix := headLen + 1 + lenLen
	size := prefix + len(e.Data)
	pad := int(recordLen(size)) - recHeaderLen - size
	pos, start := w.size(), len(w.buf)
	w.buf = slices.Grow(w.buf, recHeaderLen+prefix+pad)[:start+recHeaderLen+prefix]
	rec := w.buf[start:]
	clear(rec[:recHeaderLen])
	p := rec[recHeaderLen:]
	if n, err := head.MarshalToSizedBuffer(p[:headLen]); err != nil || n != headLen {
		w.buf = w.buf[:start]
		return fmt.Errorf("raftstore: an entry's head encoded to %d bytes, not %d: %v", n, headLen, err)
	}
	p[headLen] = entDataField<<3 | wireBytes
	copy(p[headLen+1:], dataLen[:lenLen])
	crc := crc32.Update(crc32.Checksum(p, castagnoli), castagnoli, e.Data)
	w.gathered = append(w.gathered, gatheredData{at: len(w.buf), data: e.Data})
	w.gatheredBytes += len(e.Data)
	w.buf = append(w.buf, make([]byte, pad)...)
	w.seal(rec, recEntry, size, crc, pos)
	return nil
}

// seal fills in the header of the record rec starts with, which lies at
// pos of what the writer holds.
func (w *recordWriter) seal(rec []byte, typ recType, size int, payloadCRC uint32, pos int) {
	binary.LittleEndian.PutUint32(rec[4:], uint32(size))
	rec[8] = byte(typ)
	rec[9], rec[10], rec[11] = byte(w.tag), byte(w.tag>>8), byte(w.tag>>16)
	binary.LittleEndian.PutUint32(rec[12:], payloadCRC)
	binary.LittleEndian.PutUint64(rec[16:], uint64(w.synced))
	binary.LittleEndian.PutUint32(rec[0:], headerCRC(w.id, w.seq, w.base+int64(pos), rec))
}

// marshaler is what the Raft types offer.
type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

func (w *recordWriter) addProto(typ recType, m marshaler) error {
	return w.add(typ, m.Size(), func(p []byte) error {
		n, err := m.MarshalToSizedBuffer(p)
		if err == nil && n != len(p) {
			err = fmt.Errorf("raftstore: a record's payload encoded to %d bytes, not the %d it said", n, len(p))
		}
		return err
	})
}

// record is a record read back.
type record struct {
	typ     recType
	tag     uint64 // its group (shared log), 0 in a group's own
	off     int64  // where it starts
	end     int64  // where the next one starts
	synced  int64
	payload []byte
}

// readRecord reads the record at off of data (a segment's bytes from its
// start). When there is no valid record there, why says so.
func readRecord(data []byte, id, seq uint64, off int64) (r record, why string) {
	if off+recHeaderLen > int64(len(data)) {
		return r, "the file ends inside a record header"
	}
	h := data[off : off+recHeaderLen]
	if allZero(h) {
		return r, "no record (zeros)"
	}
	size := binary.LittleEndian.Uint32(h[4:])
	typ := recType(h[8])
	synced := int64(binary.LittleEndian.Uint64(h[16:]))
	switch {
	case typ < recSegment || typ > recDrop:
		return r, "not a record header"
	case synced > off || synced%recAlign != 0:
		return r, "not a record header (its synced offset is past it)"
	case binary.LittleEndian.Uint32(h[0:]) != headerCRC(id, seq, off, h):
		return r, "header checksum mismatch"
	}
	end := off + recordLen(int(size))
	if end > int64(len(data)) {
		return r, fmt.Sprintf("the file ends inside the record (%d bytes of payload)", size)
	}
	payload := data[off+recHeaderLen : off+recHeaderLen+int64(size)]
	if binary.LittleEndian.Uint32(h[12:]) != crc32.Checksum(payload, castagnoli) {
		return r, "payload checksum mismatch"
	}
	tag := uint64(h[9]) | uint64(h[10])<<8 | uint64(h[11])<<16
	return record{typ: typ, tag: tag, off: off, end: end, synced: synced, payload: payload}, ""
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// The segment header's payload.
const (
	segMagic      = "omnibus-raftlog\x00"
	segVersion    = 1
	segHeaderSize = len(segMagic) + 4 + 8 + 8 + 8 + 4
)

// segRecycled flags a segment written over a recycled file.
const segRecycled = 1

// segHeader is what a segment's first record says.
type segHeader struct {
	id, seq uint64
	// prevEnd is where the previous segment's trusted records end: its
	// length when it filled up, less after a failed write or fsync
	// (whatever lies beyond is never read again).
	prevEnd int64
	// recycled: the file held an older segment, whose records follow
	// this one's until it is full.
	recycled bool
}

func (h segHeader) fill(p []byte) error {
	n := copy(p, segMagic)
	binary.LittleEndian.PutUint32(p[n:], segVersion)
	binary.LittleEndian.PutUint64(p[n+4:], h.id)
	binary.LittleEndian.PutUint64(p[n+12:], h.seq)
	binary.LittleEndian.PutUint64(p[n+20:], uint64(h.prevEnd))
	var flags uint32
	if h.recycled {
		flags |= segRecycled
	}
	binary.LittleEndian.PutUint32(p[n+28:], flags)
	return nil
}

func parseSegHeader(p []byte) (segHeader, error) {
	if len(p) != segHeaderSize || string(p[:len(segMagic)]) != segMagic {
		return segHeader{}, fmt.Errorf("not a segment header")
	}
	p = p[len(segMagic):]
	if v := binary.LittleEndian.Uint32(p); v != segVersion {
		return segHeader{}, fmt.Errorf("segment format version %d, not %d", v, segVersion)
	}
	return segHeader{id: binary.LittleEndian.Uint64(p[4:]), seq: binary.LittleEndian.Uint64(p[12:]),
		prevEnd:  int64(binary.LittleEndian.Uint64(p[20:])),
		recycled: binary.LittleEndian.Uint32(p[28:])&segRecycled != 0}, nil
}

// Segment file names.
const segExt = ".seg"

func segName(seq uint64) string { return fmt.Sprintf("%016x%s", seq, segExt) }

func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segExt)
	if !ok || len(s) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(s, 16, 64)
	return seq, err == nil && seq > 0
}
