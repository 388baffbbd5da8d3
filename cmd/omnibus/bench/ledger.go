package bench

import (
	"fmt"
	"sync"
)

// A Ledger accounts for every message of one run so that a benchmark
// verifies what it measures. Each message gets a unique sequence number
// from [Ledger.Next] (dense, starting at 1) and carries it with the run id.
// Senders report what happened to it ([Ledger.Sent], [Ledger.Acked],
// [Ledger.SendFailed]); receivers report every delivery
// ([Ledger.Received]) and every delivery they gave back or lost the lock
// of ([Ledger.Released]); receivers that wait for the broker to confirm
// their completions also report those ([Ledger.Completed],
// [Ledger.CompletionUnanswered]). [Ledger.Tally] then tells loss,
// duplicates, explained redeliveries, redeliveries of confirmed
// completions, messages never sent, and per-session order violations.
//
// Per-session order is judged on the broker's sequence number when the
// delivery carries one ([Delivery].BrokerSeq): Service Bus promises FIFO
// in the order it accepted messages, which is not necessarily the order
// in which concurrent sends were numbered here. Without a broker number
// the ledger's own numbers stand in, which holds only when each session's
// messages are sent one after another. Loss and duplicates are always
// accounted on the ledger's numbers.
//
// A run may have several streams: a topic with K subscriptions delivers
// each message once per subscription, so each subscription is a stream
// and every stream must see every message.
//
// All methods are safe for concurrent use.
type Ledger struct {
	runID   string
	streams int

	mu         sync.Mutex // guards the fields below
	state      []uint8    // per message (index seq-1): stSent, stAcked, stFailed
	session    []int32    // per message: index into sessions
	recv       []uint32   // per message and stream: deliveries seen
	released   []uint32   // per message and stream: deliveries given back by us
	completion []uint8    // per message and stream: cmpConfirmed, cmpUnanswered
	sessions   []string
	sessionIdx map[string]int32
	lastFirst  []int64 // per session and stream: highest order key first delivered
	// unseen holds, per session and stream, the deliveries the client
	// gave back without its application seeing them (ReleasedUnseen)
	// that no out-of-order first delivery has been put down to yet.
	unseen         [][]unseenRelease
	outOfOrder     int64
	orderExplained int64
	misrouted      int64
	unknown        int64
	foreign        int64
	pending        int64 // acked (message, stream) pairs not delivered yet
	examples       []string
	// partitions counts deliveries by the partition their broker
	// sequence number names (its top 16 bits, as Service Bus's
	// partitioned entities number messages).
	partitions map[int]int64

	// Completion accounting (ledger_completion.go).
	completedAgain  int64 // deliveries of a message whose completion the broker had confirmed
	unansweredAgain int64 // deliveries of a message after a completion whose answer was lost
	neverSent       int64 // deliveries of a message allocated but never handed to a transport
}

const (
	stSent uint8 = 1 << iota
	stAcked
	stFailed
)

const maxExamples = 10

// NewLedger returns a ledger for the run runID whose messages are each
// delivered to streams receivers' entities (1 for a queue, K for a topic
// with K subscriptions).
func NewLedger(runID string, streams int) *Ledger {
	if streams < 1 {
		streams = 1
	}
	return &Ledger{runID: runID, streams: streams, sessionIdx: map[string]int32{}, partitions: map[int]int64{}}
}

// RunID is the run id every message of this ledger carries.
func (l *Ledger) RunID() string { return l.runID }

// Next allocates the next sequence number for a message of session
// ("" when the entity has no sessions). Within a session, messages must
// be sent in the order of their numbers for the FIFO check to hold.
func (l *Ledger) Next(session string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx, ok := l.sessionIdx[session]
	if !ok {
		idx = int32(len(l.sessions))
		l.sessions = append(l.sessions, session)
		l.sessionIdx[session] = idx
		for range l.streams {
			l.lastFirst = append(l.lastFirst, 0)
			l.unseen = append(l.unseen, nil)
		}
	}
	l.state = append(l.state, 0)
	l.session = append(l.session, idx)
	for range l.streams {
		l.recv = append(l.recv, 0)
		l.released = append(l.released, 0)
		l.completion = append(l.completion, 0)
	}
	return uint64(len(l.state))
}

// Sent records that message seq was handed to the transport.
func (l *Ledger) Sent(seq uint64) { l.mark(seq, stSent) }

// Acked records that the broker accepted message seq (for presettled
// sends: that the transport took it, as nothing more will be known).
func (l *Ledger) Acked(seq uint64) { l.mark(seq, stAcked) }

// SendFailed records that sending message seq failed or was rejected.
// Such a message may or may not arrive; neither is an error.
func (l *Ledger) SendFailed(seq uint64) { l.mark(seq, stFailed) }

func (l *Ledger) mark(seq uint64, bit uint8) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq == 0 || seq > uint64(len(l.state)) {
		return
	}
	if bit == stAcked && l.state[seq-1]&stAcked == 0 {
		base := int(seq-1) * l.streams
		for s := range l.streams {
			if l.recv[base+s] == 0 {
				l.pending++
			}
		}
	}
	l.state[seq-1] |= bit
}

// Pending is the number of acknowledged messages (counted once per
// stream) not delivered yet: receivers are done when it reaches zero.
func (l *Ledger) Pending() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

// Delivery is what a receiver read from one delivered message.
type Delivery struct {
	RunID     string // the run id stamped on the message
	Seq       uint64 // the ledger sequence number stamped on it
	Session   string // the session it arrived in ("" for none)
	BrokerSeq int64  // the broker's sequence number; 0 when unknown
}

// Received records a delivery d on stream (0-based). Messages of other
// runs are counted as foreign and otherwise ignored. It reports whether
// the message belongs to this run.
func (l *Ledger) Received(stream int, d Delivery) bool {
	ours, _ := l.Delivered(stream, d)
	return ours
}

// Delivered is [Ledger.Received] that also returns which delivery of
// the message on stream this is (1 for the first), for
// [Ledger.Completed]; 0 when the message is not a known one of this run.
func (l *Ledger) Delivered(stream int, d Delivery) (ours bool, nth uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	runID, seq, session := d.RunID, d.Seq, d.Session
	if runID != l.runID {
		l.foreign++
		return false, 0
	}
	if seq == 0 || seq > uint64(len(l.state)) || stream < 0 || stream >= l.streams {
		l.unknown++
		l.exampleLocked("unknown message: stream %d seq %d", stream, seq)
		return true, 0
	}
	i := int(seq-1)*l.streams + stream
	l.recv[i]++
	nth = l.recv[i]
	if d.BrokerSeq > 0 {
		l.partitions[partitionOf(d.BrokerSeq)]++
	}
	if l.recv[i] == 1 && l.state[seq-1]&stAcked != 0 {
		l.pending--
	}
	l.judgeDeliveryLocked(seq, stream, i)
	sidx := l.session[seq-1]
	if l.sessions[sidx] != session {
		l.misrouted++
		l.exampleLocked("seq %d of session %q arrived in session %q", seq, l.sessions[sidx], session)
		return true, nth
	}
	if l.recv[i] > 1 {
		return true, nth // a redelivery: judged in Tally
	}
	key, what := int64(seq), "seq"
	if d.BrokerSeq > 0 {
		key, what = d.BrokerSeq, "broker seq"
	}
	last := &l.lastFirst[int(sidx)*l.streams+stream]
	switch {
	case session == "" || key >= *last:
	case l.explainLocked(&l.unseen[int(sidx)*l.streams+stream], key, seq):
		l.orderExplained++
	default:
		l.outOfOrder++
		l.exampleLocked("session %q stream %d: %s %d after %d", session, stream, what, key, *last)
	}
	if key > *last {
		*last = key
	}
	return true, nth
}

// unseenRelease is n deliveries of a session a client gave back unseen:
// each was of a message allocated by then (ledger number up to upTo) and
// not yet seen by the application (order key above above).
type unseenRelease struct {
	above int64
	upTo  uint64
	n     int64
}

// ReleasedUnseen records that a client gave back n deliveries of session
// on stream that its application never saw. The Go SDK's receiver does
// this between two ReceiveMessages calls: what arrives for the credit it
// left open is released by its "releaser" (azservicebus receiver.go,
// newReleaserFunc), which logs how many. A released message goes back to
// the head of its session, as Service Bus redelivers it, but behind the
// messages already transferred to the link: while the releaser gives
// back 5, the broker may have sent 6, which the SDK keeps and hands over
// before 5 comes again. So up to n first deliveries of the session that
// come after later ones are explained (Tally.OrderExplained), not
// violations: each of a message that existed when the release was
// recorded and that the application had not seen by then (above the
// highest first delivered). Record a release before the deliveries
// received after it.
func (l *Ledger) ReleasedUnseen(stream int, session string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx, ok := l.sessionIdx[session]
	if !ok || session == "" || stream < 0 || stream >= l.streams || n <= 0 {
		return
	}
	i := int(idx)*l.streams + stream
	l.unseen[i] = append(l.unseen[i], unseenRelease{above: l.lastFirst[i], upTo: uint64(len(l.state)), n: n})
}

// explainLocked reports whether one of the releases rs explains a first
// delivery of message seq (order key key) out of order, and uses it up.
func (l *Ledger) explainLocked(rs *[]unseenRelease, key int64, seq uint64) bool {
	for i := range *rs {
		r := &(*rs)[i]
		if key > r.above && seq <= r.upTo {
			if r.n--; r.n == 0 {
				*rs = append((*rs)[:i], (*rs)[i+1:]...)
			}
			return true
		}
	}
	return false
}

// partitionOf is the partition a broker sequence number names: its top 16
// bits (0 on an entity without partitions).
func partitionOf(brokerSeq int64) int { return int(uint64(brokerSeq) >> 48) }

// Released records that a delivery of seq on stream went back to the
// broker by our doing (abandoned, released, or its lock expired or was
// lost), which explains one later redelivery.
func (l *Ledger) Released(stream int, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq == 0 || seq > uint64(len(l.state)) || stream < 0 || stream >= l.streams {
		return
	}
	l.released[int(seq-1)*l.streams+stream]++
}

func (l *Ledger) exampleLocked(format string, args ...any) {
	if len(l.examples) < maxExamples {
		l.examples = append(l.examples, fmt.Sprintf(format, args...))
	}
}
