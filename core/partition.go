package core

import (
	"hash/fnv"
	"strconv"
)

// Partitioned entities.
//
// A queue or topic created with EnablePartitioning is spread over
// several partitions, as Service Bus spreads it over several message
// brokers and stores. Each partition is a whole entity of its own at run
// time (an *entity with its own id, queue, dead-letter subqueue, inlet,
// duplicate-detection history, sessions and quota), reachable only
// through its parent's parts: the registry, listings and management see
// the parent alone. A subscription of a partitioned topic is partitioned
// the same way, its partition p fed by the topic's partition p, so a
// fan-out stays within one partition.
//
// A message's partition is chosen by its partition key, as Service Bus
// chooses it: the SessionId, else the PartitionKey, else the MessageId
// when the entity detects duplicates; a message with none of these goes
// to the partitions in turn. All messages of one key go to one
// partition, so order holds per key and per session; a session and its
// state live in one partition; duplicate detection (keyed by MessageId)
// sees every copy of a message in one partition.
//
// Sequence numbers carry the partition in their top 16 bits, as Service
// Bus's do: partition p numbers its messages p<<48 + 1, p<<48 + 2, ….
// So a sequence number names its partition (deferred receive, scheduled
// cancel), and numbers sorted across partitions run through partition
// 0's, then 1's: a peek from a sequence number pages through them all.
// A lock token carries the partition in its last byte, so a settlement
// finds its partition without searching.
//
// Storage: the parent's entity record lists its partitions' ids
// (entityRecord.Parts); every other record (messages, sequence
// reservations, duplicate history, session state) is keyed by the
// partition's id, exactly as an unpartitioned entity's are by its own.
// Rules of a partitioned subscription are stored once, under the
// parent's id, and shared by its partitions.

// DefaultPartitionCount is how many partitions an entity created with
// EnablePartitioning gets unless [Config.PartitionCount] says otherwise:
// Service Bus's Standard tier always makes 16.
const DefaultPartitionCount = 16

// MaxPartitionCount bounds [Config.PartitionCount], so that a sequence
// number (partition << 48 | n) stays below 2^53 and reads exactly as a
// JSON number (JavaScript's doubles), and a lock token's last byte can
// name the partition.
const MaxPartitionCount = 32

// partitionShift places the partition in a sequence number's top 16 bits.
const partitionShift = 48

// MaxPartitionKeyLength is Service Bus's limit on PartitionKey (and
// SessionId, which serves as one).
const MaxPartitionKeyLength = 128

// PartitionOfSequence returns the partition a sequence number of a
// partitioned entity belongs to.
func PartitionOfSequence(seq int64) int { return int(uint64(seq) >> partitionShift) }

// partitionBase is the sequence number partition p counts up from.
func partitionBase(p int) int64 { return int64(p) << partitionShift }

// partitionKey is the key a message's partition is chosen by on entity
// d, "" for none (any partition).
func partitionKey(d *Entity, m *Message) string {
	switch {
	case m.SessionID != "":
		return m.SessionID
	case m.PartitionKey != "":
		return m.PartitionKey
	case d.RequiresDuplicateDetection:
		return m.MessageIDString()
	}
	return ""
}

// PartitionOfKey returns the partition of n a message of partition key
// key goes to (its SessionId, else PartitionKey, else MessageId when the
// entity detects duplicates).
func PartitionOfKey(key string, n int) int { return partitionOfKey(key, n) }

// partitionOfKey maps a partition key to one of n partitions.
func partitionOfKey(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// root is the entity a client names: a partition's parent, or e itself.
func (e *entity) root() *entity {
	if e.parent != nil {
		return e.parent
	}
	return e
}

// partitioned reports whether e is spread over partitions.
func (e *entity) partitioned() bool { return e.parts != nil }

// mainQueues returns the queues a receiver of e reads (its partitions'
// or its own), dead-letter subqueues with dead.
func (e *entity) mainQueues(dead bool) []*queue {
	if e.parts == nil {
		if e.q == nil {
			return nil
		}
		if dead {
			return []*queue{e.q.dead}
		}
		return []*queue{e.q}
	}
	qs := make([]*queue, len(e.parts))
	for i, p := range e.parts {
		qs[i] = p.q
		if dead {
			qs[i] = p.q.dead
		}
	}
	return qs
}

// allQueues returns every queue of e: each partition's (or its own) main
// queue and dead-letter subqueue.
func (e *entity) allQueues() []*queue {
	var qs []*queue
	for _, x := range e.units() {
		if x.q != nil {
			qs = append(qs, x.q, x.q.dead)
		}
	}
	return qs
}

// units returns the entities that hold e's messages: its partitions, or
// e itself.
func (e *entity) units() []*entity {
	if e.parts != nil {
		return e.parts
	}
	return []*entity{e}
}

// partForSession returns the partition of e that holds session id.
func (e *entity) partForSession(id string) *entity {
	if e.parts == nil {
		return e
	}
	return e.parts[partitionOfKey(id, len(e.parts))]
}

// partForSeq returns the partition of e whose sequence numbers include
// seq, nil when seq names none.
func (e *entity) partForSeq(seq int64) *entity {
	if e.parts == nil {
		return e
	}
	if p := PartitionOfSequence(seq); seq > 0 && p < len(e.parts) {
		return e.parts[p]
	}
	return nil
}

// partForLock returns the partition of e that handed out tok (see
// tagLock); part 0 when tok names none, where it is lock lost as any
// unknown token is.
func (e *entity) partForLock(tok LockToken) *entity {
	if e.parts == nil {
		return e
	}
	if p := int(tok[len(tok)-1]); p < len(e.parts) {
		return e.parts[p]
	}
	return e.parts[0]
}

// tagLock marks a lock token handed out by a partition's queue with the
// partition's index (see partForLock).
func (q *queue) tagLock(tok LockToken) LockToken {
	if q.ent.parent != nil {
		tok[len(tok)-1] = byte(q.ent.part)
	}
	return tok
}

// partitionName is how a partition appears in logs and checks.
func partitionName(path string, p int) string {
	return path + "#" + strconv.Itoa(p)
}

// pickPart returns the index of the partition of e message m goes to.
func (e *entity) pickPart(d *Entity, m *Message) int {
	n := len(e.parts)
	if key := partitionKey(d, m); key != "" {
		return partitionOfKey(key, n)
	}
	return e.nextHeldPart(d)
}

// splitByPartition groups msgs by the partition of e each goes to,
// keeping their order within a partition. Messages without a key go to
// one partition together, as a Service Bus batch does. at[p] lists the indexes into
// msgs of partition p's messages.
func (e *entity) splitByPartition(d *Entity, msgs []*Message) (at [][]int) {
	n := len(e.parts)
	at = make([][]int, n)
	any := -1 // where this send's messages without a key go: one partition
	for i, m := range msgs {
		var p int
		if key := partitionKey(d, m); key != "" {
			p = partitionOfKey(key, n)
		} else {
			if any < 0 {
				any = e.nextHeldPart(d)
			}
			p = any
		}
		at[p] = append(at[p], i)
	}
	return at
}
