package core

import "encoding/binary"

// Key layout. Every key starts with a one-byte table tag; numeric parts are
// big-endian so that byte order is numeric order.
//
//	'E' entity-key                → entity description (JSON)
//	'I' entity id:8               → (empty) marks ids in use
//	'N' id:8                      → sequence numbers reserved up to (uint64)
//	'Q' id:8 seq:8                → state record (record.go)
//	'B' owner:8 seq:8             → body record (record.go)
//	'L' id:8 pull:8               → delivery record: the counts a pull gave its messages (pull.go)
//	'L' id:8 pull:8 seq:8         → (empty) cancels message seq's entry in that record
//	'D' id:8 message-id           → duplicate-detection history: first seen (unix nanos)
//	'S' id:8 session-id           → session state
//	'R' id:8 rule-name            → rule (JSON)
//	'T' group:8 number:8          → outbox: a transfer to another data group (transfer.go)
//	'X' transfer-id:16            → a transfer applied here: when (unix nanos)
//
// Entity ids are allocated from a counter kept in 'E' descriptions; a
// queue's dead-letter subqueue uses id|dlqBit.
const (
	tabEntity  = 'E'
	tabSeq     = 'N'
	tabState   = 'Q'
	tabBody    = 'B'
	tabPull    = 'L'
	tabDedup   = 'D'
	tabSession = 'S'
	tabRule    = 'R'
)

const dlqBit = uint64(1) << 63

func idKey(tab byte, id uint64) []byte {
	k := make([]byte, 9, 17)
	k[0] = tab
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

func seqKey(tab byte, id uint64, seq int64) []byte {
	return binary.BigEndian.AppendUint64(idKey(tab, id), uint64(seq))
}

// seqKeyLen is the length of a seqKey.
const seqKeyLen = 17

// appendSeqKey appends seqKey(tab, id, seq) to b.
func appendSeqKey(b []byte, tab byte, id uint64, seq int64) []byte {
	b = append(b, tab)
	b = binary.BigEndian.AppendUint64(b, id)
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

func nameKey(tab byte, id uint64, name string) []byte {
	return append(idKey(tab, id), name...)
}

func entityRecordKey(key string) []byte {
	return append([]byte{tabEntity}, key...)
}

func seqFromKey(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(k)-8:]))
}
