package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A follower receives every committed byte of the log in MsgApp entries.
// gogoproto's Message.Unmarshal allocates and copies each entry's Data
// on its own; unmarshalMessage instead lets the entries' Data point into
// the bytes read when the caller hands them over (a frame read into a
// buffer of its own, frameArena), or into one copy of a message that
// carries entries otherwise: no copy, or one allocation per message, not
// one per entry. Everything other than the entries is decoded by
// gogoproto as before.

// Protocol Buffers field numbers and wire types used below (raft.proto).
const (
	msgEntriesField = 7 // Message.entries, repeated Entry
	entTypeField    = 1 // Entry.Type
	entTermField    = 2 // Entry.Term
	entIndexField   = 3 // Entry.Index
	entDataField    = 4 // Entry.Data
	wireVarint      = 0
	wireFixed64     = 1
	wireBytes       = 2
	wireFixed32     = 5
)

var errBadMessage = errors.New("raftstore: malformed raft message")

// unmarshalMessage decodes b into m as m.Unmarshal(b) does, except that
// the entries' Data alias b when owned (the caller hands b over: nothing
// may change it afterwards), else one copy of b (b is not kept: the
// caller may reuse it).
func unmarshalMessage(m *pb.Message, b []byte, owned bool) error {
	// First pass: count the entries and find whether there is anything
	// else than entries to decode.
	var n int
	rest := 0 // bytes of fields other than entries
	for p := b; len(p) > 0; {
		num, wt, field, next, err := nextField(p)
		if err != nil {
			// Something this walker does not take (a group, a malformed
			// field): gogoproto decides, as before.
			return m.Unmarshal(b)
		}
		if num == msgEntriesField && wt == wireBytes {
			n++
		} else {
			rest += len(field)
		}
		p = next
	}
	if n == 0 {
		return m.Unmarshal(b)
	}
	if !owned {
		b = bytes.Clone(b)
	}
	var others []byte
	if rest > 0 {
		others = make([]byte, 0, rest)
	}
	ents := make([]pb.Entry, 0, n)
	for p := b; len(p) > 0; {
		num, wt, field, next, _ := nextField(p)
		if num == msgEntriesField && wt == wireBytes {
			body, _ := bytesPayload(field)
			var e pb.Entry
			if err := unmarshalEntry(&e, body); err != nil {
				return err
			}
			ents = append(ents, e)
		} else {
			others = append(others, field...)
		}
		p = next
	}
	if err := m.Unmarshal(others); err != nil {
		return err
	}
	m.Entries = ents
	return nil
}

// unmarshalEntry decodes b into e as e.Unmarshal(b) does, except that
// e.Data aliases b (capped, so that appending to it copies).
func unmarshalEntry(e *pb.Entry, b []byte) error {
	*e = pb.Entry{}
	for p := b; len(p) > 0; {
		num, wt, field, next, err := nextField(p)
		if err != nil {
			*e = pb.Entry{}
			return e.Unmarshal(b)
		}
		switch {
		case wt == wireVarint && (num == entTypeField || num == entTermField || num == entIndexField):
			_, k := binary.Uvarint(field) // the tag
			v, _ := binary.Uvarint(field[k:])
			switch num {
			case entTypeField:
				e.Type = pb.EntryType(int32(v))
			case entTermField:
				e.Term = v
			case entIndexField:
				e.Index = v
			}
		case wt == wireBytes && num == entDataField:
			d, _ := bytesPayload(field)
			e.Data = d[:len(d):len(d)]
		default:
			// A field this decoder does not know (a newer raft's) or a
			// malformed one: gogoproto decides, with copies.
			*e = pb.Entry{}
			return e.Unmarshal(b)
		}
		p = next
	}
	return nil
}

// nextField splits the first field (tag and value) off p: its number, wire
// type, the field's bytes (tag included) and what follows.
func nextField(p []byte) (num int, wt int, field, next []byte, err error) {
	tag, k := binary.Uvarint(p)
	if k <= 0 || tag>>3 == 0 || tag>>3 > 1<<29 {
		return 0, 0, nil, nil, errBadMessage
	}
	num, wt = int(tag>>3), int(tag&7)
	end := k
	switch wt {
	case wireVarint:
		_, l := binary.Uvarint(p[k:])
		if l <= 0 {
			return 0, 0, nil, nil, errBadMessage
		}
		end += l
	case wireFixed64:
		end += 8
	case wireFixed32:
		end += 4
	case wireBytes:
		size, l := binary.Uvarint(p[k:])
		if l <= 0 || size > uint64(len(p)-k-l) {
			return 0, 0, nil, nil, errBadMessage
		}
		end += l + int(size)
	default:
		return 0, 0, nil, nil, errBadMessage
	}
	if end > len(p) {
		return 0, 0, nil, nil, errBadMessage
	}
	return num, wt, p[:end], p[end:], nil
}

// bytesPayload is the payload of a length-delimited field (tag included in
// field, as nextField returns it).
func bytesPayload(field []byte) ([]byte, error) {
	_, k := binary.Uvarint(field)
	size, l := binary.Uvarint(field[k:])
	if l <= 0 {
		return nil, errBadMessage
	}
	return field[k+l : k+l+int(size)], nil
}
