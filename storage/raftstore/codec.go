package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/omnibusmq/omnibus/storage"
)

// Keys of the state database. The core's keys live under dataPrefix, so
// that the node's own records (metaApplied) sit in the same database,
// written in the same batches, without the core ever seeing them.
const dataPrefix = 'd'

var metaApplied = []byte("m/applied")

// entryVersion is the first byte of every proposal entry this package
// writes.
const entryVersion = 1

// entryHeader is what a proposal entry says about itself: who proposed it
// (node id and a nonce drawn at each start, so that a restarted node does
// not mistake an old entry for its own) and which proposal sequence
// numbers it carries, first to first+count-1.
type entryHeader struct {
	node, nonce  uint64
	first, count uint64
}

// appendHeader writes h at the start of an entry.
func appendHeader(dst []byte, h entryHeader) []byte {
	dst = append(dst, entryVersion)
	dst = binary.AppendUvarint(dst, h.node)
	dst = binary.BigEndian.AppendUint64(dst, h.nonce)
	dst = binary.AppendUvarint(dst, h.first)
	return binary.AppendUvarint(dst, h.count)
}

// encodeBatch appends b's operations, keys prefixed with dataPrefix, in
// the form decodeEntry reads. It rejects an unknown kind.
//
// An operation is its kind's storage.OpKind byte (1 Set, 2 Delete,
// 3 DeletePrefix, 4 DeleteOnce) or 5 (opCodeSetNew: a Set marked New,
// storage.Batch.SetNew), the key, and for a Set the value. Kinds 4 and 5
// came later: every entry written before them still decodes, and a node
// applies them to its state database as the store does (pebblestore: a
// SingleDelete; a Set). A node of a version without one skips an entry
// holding it (errBadEntry), so every node of a cluster must run a version
// that knows kind 5 before any of them writes one.
func encodeBatch(dst []byte, b *storage.Batch) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(b.Ops)))
	for i, op := range b.Ops {
		switch op.Kind {
		case storage.OpSet, storage.OpDelete, storage.OpDeletePrefix, storage.OpDeleteOnce:
		default:
			return nil, fmt.Errorf("raftstore: op %d: unknown kind %d", i, op.Kind)
		}
		code := byte(op.Kind)
		if op.Kind == storage.OpSet && op.New {
			code = opCodeSetNew
		}
		dst = append(dst, code)
		dst = binary.AppendUvarint(dst, uint64(len(op.Key))+1)
		dst = append(dst, dataPrefix)
		dst = append(dst, op.Key...)
		if op.Kind == storage.OpSet {
			dst = binary.AppendUvarint(dst, uint64(len(op.Value)))
			dst = append(dst, op.Value...)
		}
	}
	return dst, nil
}

// encodedSize is an upper bound of encodeBatch's output for b.
func encodedSize(b *storage.Batch) int {
	n := binary.MaxVarintLen64
	for _, op := range b.Ops {
		n += 1 + 2*binary.MaxVarintLen64 + 1 + len(op.Key) + len(op.Value)
	}
	return n
}

// opCodeSetNew is an operation's byte for a Set marked New (encodeBatch).
const opCodeSetNew = 5

var errBadEntry = errors.New("raftstore: malformed entry")

// decodeEntry reads an entry's header and appends its operations to ops;
// keys and values point into data.
func decodeEntry(data []byte, ops []storage.Op) (entryHeader, []storage.Op, error) {
	var h entryHeader
	if len(data) == 0 || data[0] != entryVersion {
		return h, ops, errBadEntry
	}
	r := reader{b: data[1:]}
	h.node = r.uvarint()
	h.nonce = r.uint64()
	h.first = r.uvarint()
	h.count = r.uvarint()
	for range h.count {
		if r.err != nil {
			break
		}
		n := r.uvarint()
		for range n {
			code := r.byte()
			kind, isNew := storage.OpKind(code), false
			if code == opCodeSetNew {
				kind, isNew = storage.OpSet, true
			}
			key := r.bytes()
			var val []byte
			if kind == storage.OpSet {
				val = r.bytes()
			}
			if r.err != nil {
				break
			}
			if kind < storage.OpSet || kind > storage.OpDeleteOnce || len(key) == 0 || key[0] != dataPrefix {
				return h, ops, errBadEntry
			}
			ops = append(ops, storage.Op{Kind: kind, New: isNew, Key: key, Value: val})
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return h, ops, errBadEntry
	}
	return h, ops, nil
}

// reader reads the varint-framed fields of an entry, remembering the
// first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadEntry
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uint64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errBadEntry
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errBadEntry
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errBadEntry
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// appliedRecord encodes the applied index and term.
func appliedRecord(index, term uint64) []byte {
	v := binary.BigEndian.AppendUint64(nil, index)
	return binary.BigEndian.AppendUint64(v, term)
}

// parseApplied decodes appliedRecord's output.
func parseApplied(v []byte) (index, term uint64, err error) {
	if len(v) != 16 {
		return 0, 0, fmt.Errorf("raftstore: applied record of %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), nil
}
