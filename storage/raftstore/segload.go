package raftstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"

	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// damagedDir is where --repair keeps the segments it cut (in the cluster
// directory), as a single node keeps its cut write-ahead log files.
const damagedDir = "omnibus-damaged"

// repairHint ends the message of a refused start.
const repairHint = "the node refuses to start on it: start it once with --repair to cut the log there " +
	"(a copy of the segments is kept in " + damagedDir + "; the node then fetches what it lacks from the leader)"

// logLoad is what reading the records gives, in order.
type logLoad struct {
	snap pb.SnapshotMetadata // the latest snapshot (Index 0: none)
	hs   pb.HardState
	ents []pb.Entry
}

// apply takes one record into account; an error says why it is damage.
func (l *logLoad) apply(r record) (maxIndex uint64, err error) {
	switch r.typ {
	case recEntry:
		var e pb.Entry
		if err := e.Unmarshal(r.payload); err != nil {
			return 0, fmt.Errorf("entry does not decode: %v", err)
		}
		if n := len(l.ents); n > 0 {
			first, last := l.ents[0].Index, l.ents[n-1].Index
			switch {
			case e.Index < first:
				l.ents = l.ents[:0]
			case e.Index <= last: // a new leader overwrote the tail
				l.ents = l.ents[:e.Index-first]
			case e.Index != last+1:
				return 0, fmt.Errorf("entry %d follows entry %d", e.Index, last)
			}
		}
		l.ents = append(l.ents, e)
		return e.Index, nil
	case recHardState:
		var hs pb.HardState
		if err := hs.Unmarshal(r.payload); err != nil {
			return 0, fmt.Errorf("hard state does not decode: %v", err)
		}
		l.hs = hs
	case recSnapshot, recInstall:
		var m pb.SnapshotMetadata
		if err := m.Unmarshal(r.payload); err != nil {
			return 0, fmt.Errorf("snapshot metadata does not decode: %v", err)
		}
		if r.typ == recInstall {
			l.ents = l.ents[:0]
			l.snap = m
		} else if m.Index >= l.snap.Index {
			l.snap = m
		}
	default:
		return 0, fmt.Errorf("a %s record inside a segment", r.typ)
	}
	return 0, nil
}

// damage is where reading stopped on damage.
type damage struct {
	seg int // index in the segment list
	off int64
	why string
}

// readResult is what reading the segments gives.
type readResult struct {
	groups map[uint64]*logLoad // by tag
	// tail is where the last segment's trusted records end; torn is set
	// when bytes follow them that must not be written over (a write a
	// crash cut short, or damage cut by repair): the log then goes on in
	// a new segment.
	tail int64
	torn bool
	dmg  *damage
}

// load reads the segments seqs and fills the memory storage, then opens
// the log for appending. Damage refuses, unless repair: the log is then
// cut at it. fresh is true when nothing of the log had become durable.
func (ls *logStore) load(seqs []uint64, repair bool) (fresh bool, err error) {
	slices.Sort(seqs)
	lastEnd := int64(-1) // where repair cut the last segment
	repaired := false
	for {
		if lastEnd < 0 {
			if seqs, err = ls.dropUnfinished(seqs); err != nil {
				return false, err
			}
		}
		if len(seqs) == 0 {
			return !repaired, ls.create()
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				return false, fmt.Errorf("raftstore: raft log %s: %w: segment %s is missing (between %s and %s)",
					ls.dir, storage.ErrCorrupt, segName(seqs[i-1]+1), segName(seqs[i-1]), segName(seqs[i]))
			}
		}
		res, err := ls.read(seqs, lastEnd)
		ls.buf = nil // it held a whole segment
		if err != nil {
			return false, err
		}
		if res.dmg == nil {
			return false, ls.finishLoad(res, repair)
		}
		path := filepath.Join(ls.dir, segName(seqs[res.dmg.seg]))
		if !repair {
			return false, fmt.Errorf("%w; %s", corrupt(path, res.dmg.off, "%s", res.dmg.why), repairHint)
		}
		kept, err := ls.keepDamaged(seqs, res.dmg)
		if err != nil {
			return false, err
		}
		ls.log.Warn("raft log damaged; cut there (--repair): the node fetches what it lacks from the leader",
			zap.String("file", path), zap.Int64("offset", res.dmg.off), zap.String("damage", res.dmg.why),
			zap.String("copy", kept))
		repaired, ls.repaired = true, true
		if res.dmg.off == 0 { // the segment's header: it goes whole
			seqs, lastEnd = seqs[:res.dmg.seg], -1
		} else {
			seqs, lastEnd = seqs[:res.dmg.seg+1], res.dmg.off
		}
	}
}

// keepDamaged keeps a copy of the damaged segment and moves the ones
// after it (which the cut drops) into damagedDir. It returns that
// directory.
func (ls *logStore) keepDamaged(seqs []uint64, d *damage) (string, error) {
	dir := filepath.Join(filepath.Dir(ls.dir), damagedDir)
	if err := ls.fs.MkdirAll(dir); err != nil {
		return "", ls.unavailable("creating "+dir, err)
	}
	for i := d.seg; i < len(seqs); i++ {
		name := segName(seqs[i])
		src, dst := filepath.Join(ls.dir, name), filepath.Join(dir, name)
		var err error
		if i == d.seg && d.off > 0 {
			err = copyFile(ls.fs, src, dst)
		} else {
			err = ls.fs.Rename(src, dst)
		}
		if err != nil {
			return "", ls.unavailable("keeping "+src+" in "+dir, err)
		}
	}
	if err := ls.fs.SyncDir(ls.dir); err != nil {
		return "", ls.unavailable("syncing "+ls.dir, err)
	}
	return dir, ls.fs.SyncDir(dir)
}

// read reads every segment's records. For each segment but the last, the
// next one's header says where its trusted records end; the last is read
// up to lastEnd if set (a cut by repair), else up to the first place
// that holds no valid record, and what lies beyond is told apart: if a
// record written after that place had been made durable follows, it is
// damage; else it is a write a crash cut short (nothing of it was
// acknowledged).
func (ls *logStore) read(seqs []uint64, lastEnd int64) (res readResult, err error) {
	ls.segs = ls.segs[:0]
	res.groups = map[uint64]*logLoad{}
	headers := make([]segHeader, len(seqs))
	for i, seq := range seqs {
		path := filepath.Join(ls.dir, segName(seq))
		data, err := ls.readFile(path, recordLen(segHeaderSize))
		if err != nil {
			return res, err
		}
		h, ok, err := ls.header(data, seq)
		if err != nil {
			return res, err
		}
		if !ok {
			res.dmg = &damage{seg: i, off: 0, why: "the segment header does not read"}
			return res, nil
		}
		headers[i] = h
	}
	for i, seq := range seqs {
		path := filepath.Join(ls.dir, segName(seq))
		end := lastEnd
		if i < len(seqs)-1 {
			end = headers[i+1].prevEnd
		}
		s := &segment{seq: seq, path: path, maxIndex: map[uint64]uint64{}}
		ls.segs = append(ls.segs, s)
		if end == 0 {
			continue // its first write failed: nothing in it counts
		}
		data, err := ls.readFile(path, end)
		if err != nil {
			return res, err
		}
		if end > int64(len(data)) {
			res.dmg = &damage{seg: i, off: int64(len(data)),
				why: fmt.Sprintf("the file ends before offset %d, where the next segment's header says its records end", end)}
			return res, nil
		}
		off, synced := int64(0), int64(0)
		for end < 0 || off < end {
			r, why := readRecord(data, ls.id, seq, off)
			switch {
			case why != "":
			case off > 0 && r.typ == recSegment:
				why = "a segment header inside a segment"
			case r.synced < synced:
				why = "not a record of this place (its synced offset goes back)"
			case end >= 0 && r.end > end:
				why = fmt.Sprintf("the record runs past offset %d, where the next segment's header says this one ends", end)
			}
			if why != "" && end >= 0 {
				res.dmg = &damage{seg: i, off: off, why: why}
				return res, nil
			}
			if why != "" {
				if later := durableAfter(data, ls.id, seq, off); later >= 0 {
					res.dmg = &damage{seg: i, off: off, why: fmt.Sprintf(
						"%s, and a record written after this place had been made durable follows at offset %d", why, later)}
					return res, nil
				}
				if tail := data[off:]; !allZero(tail) {
					res.torn = true // the log goes on in a new segment
					if headers[i].recycled {
						ls.log.Info("the raft log's last segment ends here; what follows is a recycled file's old records, or a write a crash cut short (never acknowledged)",
							zap.String("file", path), zap.Int64("offset", off))
					} else {
						ls.log.Warn("cut a write a crash left unfinished at the end of the raft log (never acknowledged)",
							zap.String("file", path), zap.Int64("offset", off), zap.Int("bytes", lastNonZero(tail)+1))
					}
				}
				break
			}
			if off > 0 {
				if why := ls.take(&res, r, s); why != "" {
					res.dmg = &damage{seg: i, off: off, why: why}
					return res, nil
				}
			}
			synced, off = r.synced, r.end
		}
		res.tail = off
	}
	if lastEnd >= 0 {
		res.torn = true // what follows the cut must not be written over
	}
	return res, nil
}

// take reads record r of segment s into the group it names; why says why
// it is damage.
func (ls *logStore) take(res *readResult, r record, s *segment) (why string) {
	if ls.solo != nil && r.tag != 0 {
		return fmt.Sprintf("a record of group %d in the log of one group", r.tag)
	}
	if r.typ == recDrop {
		delete(res.groups, r.tag)
		for _, s := range ls.segs {
			delete(s.maxIndex, r.tag)
		}
		return ""
	}
	l := res.groups[r.tag]
	if l == nil {
		l = &logLoad{}
		res.groups[r.tag] = l
	}
	m, err := l.apply(r)
	if err != nil {
		return err.Error()
	}
	if m > 0 {
		s.maxIndex[r.tag] = max(s.maxIndex[r.tag], m)
	}
	return ""
}

// finishLoad fills each group's memory storage with what was read and
// opens the log for appending: after the last record, or in a new segment
// when something follows it.
func (ls *logStore) finishLoad(res readResult, repair bool) error {
	if ls.solo != nil {
		if l := res.groups[0]; l != nil {
			if err := ls.solo.fill(l, repair); err != nil {
				return err
			}
		}
	} else {
		for _, tag := range slices.Sorted(maps.Keys(res.groups)) {
			if err := ls.newGroup(tag).fill(res.groups[tag], repair); err != nil {
				return err
			}
		}
	}
	last := ls.segs[len(ls.segs)-1]
	if res.torn {
		if err := ls.startSegment(last.seq+1, res.tail); err != nil {
			return err
		}
		return ls.write(nil, nil)
	}
	f, err := ls.fs.OpenRW(last.path)
	if err != nil {
		return ls.unavailable("opening "+last.path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return ls.unavailable("reading "+last.path, err)
	}
	ls.act = &activeSegment{seg: last, f: f, off: res.tail, synced: res.tail, alloc: size, writes: 1, dirSynced: true}
	return nil
}

// fill fills the group's memory storage with what was read of it.
func (g *groupLog) fill(l *logLoad, repair bool) error {
	ls := g.ls
	g.hs, g.snap = l.hs, l.snap
	if l.snap.Index > 0 {
		if err := g.mem.ApplySnapshot(pb.Snapshot{Metadata: l.snap}); err != nil {
			return err
		}
	}
	first := l.snap.Index + 1
	ents := l.ents
	for len(ents) > 0 && ents[0].Index < first {
		ents = ents[1:]
	}
	if len(ents) > 0 && ents[0].Index != first {
		if !repair {
			return fmt.Errorf("raftstore: raft log %s: %w: %sits entries start at %d, after the snapshot at %d; %s",
				ls.dir, storage.ErrCorrupt, g.name(), ents[0].Index, first-1, repairHint)
		}
		ls.log.Warn("raft log entries missing after the snapshot; dropping the rest (--repair)",
			zap.Uint64("group", g.tag), zap.Uint64("snapshot", first-1), zap.Uint64("from", ents[0].Index))
		ents = nil
	}
	if err := g.mem.Append(ents); err != nil {
		return err
	}
	if hs := l.hs; hs.Term != 0 || hs.Vote != 0 || hs.Commit != 0 {
		// The commit index need not be durable (it is written lazily):
		// keep it within what the log holds, as Raft requires.
		last, _ := g.mem.LastIndex()
		hs.Commit = min(max(hs.Commit, l.snap.Index), last)
		if err := g.mem.SetHardState(hs); err != nil {
			return err
		}
	}
	return nil
}

// readFile reads the first n bytes of path (n < 0: all of it; fewer if
// the file is shorter) into the reused buffer.
func (ls *logStore) readFile(path string, n int64) ([]byte, error) {
	f, err := ls.fs.OpenRW(path)
	if err != nil {
		return nil, ls.unavailable("opening "+path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, ls.unavailable("reading "+path, err)
	}
	if n < 0 || n > size {
		n = size
	}
	if int64(cap(ls.buf)) < n {
		ls.buf = make([]byte, n)
	}
	data := ls.buf[:n]
	if k, err := f.ReadAt(data, 0); err != nil && !(err == io.EOF && int64(k) == n) {
		return nil, ls.unavailable("reading "+path, err)
	}
	return data, nil
}

// durableAfter returns the offset of the first valid record after off in
// data that was written once the segment had been synced past off, or -1.
func durableAfter(data []byte, id, seq uint64, off int64) int64 {
	for p := off + recAlign; p+recHeaderLen <= int64(len(data)); p += recAlign {
		if t := recType(data[p+8]); t < recSegment || t > recDrop {
			continue
		}
		if synced := int64(binary.LittleEndian.Uint64(data[p+16:])); synced <= off {
			continue
		}
		if _, why := readRecord(data, id, seq, p); why == "" {
			return p
		}
	}
	return -1
}

func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// dropUnfinished removes the last segment while its opening records never
// became durable (a crash while it was being created): it holds nothing
// that was acknowledged.
func (ls *logStore) dropUnfinished(seqs []uint64) ([]uint64, error) {
	for len(seqs) > 0 {
		seq := seqs[len(seqs)-1]
		path := filepath.Join(ls.dir, segName(seq))
		data, err := ls.readFile(path, recordLen(segHeaderSize))
		if err != nil {
			return nil, err
		}
		if _, ok, err := ls.header(data, seq); err != nil || ok {
			return seqs, err
		}
		if data, err = ls.readFile(path, -1); err != nil {
			return nil, err
		}
		if durableAfter(data, ls.id, seq, 0) >= 0 {
			return seqs, nil // damage: read reports it
		}
		ls.log.Warn("removing a raft log segment whose creation a crash interrupted", zap.String("file", path))
		if err := ls.fs.Remove(path); err != nil {
			return nil, ls.unavailable("removing "+path, err)
		}
		if err := ls.fs.SyncDir(ls.dir); err != nil {
			return nil, ls.unavailable("syncing "+ls.dir, err)
		}
		seqs = seqs[:len(seqs)-1]
	}
	return seqs, nil
}

// header reads a segment's header record from data; ok is false when it
// is not readable. A header of another node's log is an error.
func (ls *logStore) header(data []byte, seq uint64) (segHeader, bool, error) {
	r, why := readRecord(data, ls.id, seq, 0)
	if why == "" && r.typ == recSegment {
		h, err := parseSegHeader(r.payload)
		if err == nil && h.id == ls.id && h.seq == seq {
			return h, true, nil
		}
		return segHeader{}, false, nil
	}
	// Another node's header does not check with our id: read its id.
	if len(data) >= recHeaderLen+segHeaderSize {
		if h, err := parseSegHeader(data[recHeaderLen : recHeaderLen+segHeaderSize]); err == nil && h.id != ls.id {
			if r, why := readRecord(data, h.id, seq, 0); why == "" && r.typ == recSegment {
				return segHeader{}, false, fmt.Errorf("raftstore: %s belongs to another node (id %d), not %d", ls.dir, h.id, ls.id)
			}
		}
	}
	return segHeader{}, false, nil
}
