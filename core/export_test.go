package core

import "runtime"

// Quiesce waits until no queue of b has expired messages waiting to be
// dead-lettered or dropped, running the disposal itself if needed. Tests
// on a fake clock call it after each step, since expiry runs on its own
// goroutine (expireLoop) rather than in the caller's.
func Quiesce(b *Broker) {
	b.mu.RLock()
	var qs []*queue
	for _, e := range b.mu.entities {
		if e.q != nil {
			qs = append(qs, e.q, e.q.dead)
		}
	}
	b.mu.RUnlock()
	for _, q := range qs {
		for {
			q.kickExpiry()
			q.mu.Lock()
			idle := !q.mu.expiryBusy && len(q.mu.expiring) == 0
			q.mu.Unlock()
			if idle {
				break
			}
			runtime.Gosched()
		}
	}
}

// WaitForWaiters spins until the queue at path has n blocked receivers
// (or accept-session waiters), so tests can order a send after a receive
// has started waiting without sleeping.
func WaitForWaiters(b *Broker, path string, n int) {
	q, err := b.queueFor(path, nil)
	if err != nil {
		return
	}
	for {
		q.mu.Lock()
		got := len(q.mu.waiters) + len(q.mu.sessions.waiters)
		q.mu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}

// WaitForReadAhead waits until no read-ahead runs on the queue at path.
func WaitForReadAhead(b *Broker, path string) {
	q, err := b.queueFor(path, nil)
	if err != nil {
		return
	}
	for q.readingAhead.Load() {
		runtime.Gosched()
	}
}

// BodyKey returns the store key of the body of message seq of the queue,
// subscription or dead-letter subqueue at path, as its state record says.
func BodyKey(b *Broker, path string, seq int64) []byte {
	q, err := b.queueFor(path, nil)
	if err != nil {
		return nil
	}
	v, err := b.store.Get(seqKey(tabState, q.id, seq))
	if err != nil {
		return nil
	}
	st, err := decodeState(v)
	if err != nil {
		return nil
	}
	return seqKey(tabBody, st.owner, seq)
}

// StateKey returns the store key of the state record of message seq of
// the queue at path.
func StateKey(b *Broker, path string, seq int64) []byte {
	q, err := b.queueFor(path, nil)
	if err != nil {
		return nil
	}
	return seqKey(tabState, q.id, seq)
}

// TimerEntries returns how many due-time entries the queue at path
// holds: lock expiries, session-lock expiries, scheduled activations.
func TimerEntries(b *Broker, path string) int {
	q, err := b.queueFor(path, nil)
	if err != nil {
		return -1
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.mu.timers)
}

// BrokerTimerEntries returns how many queues wait in the broker timer.
func BrokerTimerEntries(b *Broker) int {
	b.timer.mu.Lock()
	defer b.timer.mu.Unlock()
	return len(b.timer.h)
}

// DedupHistory returns how many message ids the duplicate detection of
// the queue or topic at path remembers, and how many entries its
// time-ordered list holds (ids of failed sends included until evicted).
func DedupHistory(b *Broker, path string) (ids, entries int) {
	e, err := b.lookup(ParseAddress(path))
	if err != nil || e.in == nil {
		return -1, -1
	}
	e.in.mu.Lock()
	defer e.in.mu.Unlock()
	return e.in.dedup.size()
}

// PendingOrphans returns how many shared-body deletions the store refused
// and the broker keeps for a retry.
func PendingOrphans(b *Broker) int { return int(b.orphans.n.Load()) }

// BreakTimers damages the timers of the queue at path the two ways a
// bug could: the first available message gets a timer entry it has no
// lock for (a leak), and the first locked one loses its entry (a lock
// that would never expire).
func BreakTimers(b *Broker, path string) {
	q, err := b.queueFor(path, nil)
	if err != nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.mu.avail.peek(); r != nil {
		q.mu.timers.push(timeItem{at: 1, rec: r})
	}
	for _, r := range q.mu.locked {
		q.dropTimerLocked(r)
		break
	}
}

// TestCodecID is the id of the property codec core's tests register:
// the properties in core's own value codec, which EncodeTestProperties
// writes.
const TestCodecID = 255

// testCodec decodes what EncodeTestProperties wrote, and nothing else.
type testCodec struct{}

func (testCodec) DecodeProperties(b []byte) (map[string]any, error) {
	r := reader{b: b}
	props := r.mapValue()
	if r.err != nil || len(r.b) != 0 {
		return nil, errCorrupt
	}
	return props, nil
}

func init() { RegisterPropertyCodec(TestCodecID, testCodec{}) }

// EncodeTestProperties encodes props as a front keeps application
// properties it does not decode, in the test codec.
func EncodeTestProperties(props map[string]any) EncodedProperties {
	b, err := appendMap(nil, props)
	if err != nil {
		panic(err)
	}
	return EncodedProperties{Codec: TestCodecID, Bytes: b, Size: (&Message{ApplicationProperties: props}).Size()}
}

// WithEncodedProperties returns m with its application properties
// encoded in the test codec, as a front would hand it over.
func WithEncodedProperties(m *Message) *Message {
	m.EncodedProperties = EncodeTestProperties(m.ApplicationProperties)
	m.ApplicationProperties = nil
	return m
}

// CloseSessionWait is how long CloseSession waits for the delivery
// writes in flight under the lock it closes.
const CloseSessionWait = closeSessionWait
