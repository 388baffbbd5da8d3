package bench

import (
	"context"
	"time"
)

// Application properties every benchmark message carries, so that a
// receiver can verify it and measure end-to-end latency.
const (
	propRun  = "bench-run"  // string: the run id
	propSeq  = "bench-seq"  // int64: the ledger sequence number
	propSent = "bench-sent" // int64: send time, Unix nanoseconds
)

// outMsg is a message to send.
type outMsg struct {
	seq     uint64
	session string    // "" when the entity has no sessions
	sent    time.Time // the send timestamp it carries
}

// inMsg is a delivery, with the stamp read back.
type inMsg struct {
	Delivery
	sent   time.Time
	handle any // the transport's own message, for settle
}

// transport opens links of one protocol (go-amqp, the SDK or REST).
type transport interface {
	// sender opens a sender on connection conn to the scenario's queue
	// or topic.
	sender(ctx context.Context, conn int) (sender, error)
	// receiver opens a receiver on connection conn for stream (a
	// subscription index for fanout) and, for sessions, session.
	receiver(ctx context.Context, conn, stream int, session string) (receiver, error)
	close(ctx context.Context)
}

// sender sends one message; safe for concurrent use (that is how several
// sends are in flight on one link).
type sender interface {
	send(ctx context.Context, m outMsg, payload []byte) error
	close(ctx context.Context)
}

// receiver is used by one goroutine.
type receiver interface {
	// receive returns one or more deliveries.
	receive(ctx context.Context) ([]inMsg, error)
	// settle completes (accepts) a peek-locked delivery; a no-op for
	// receive-and-delete.
	settle(ctx context.Context, m inMsg) error
	close(ctx context.Context)
}

// asyncSettler is a receiver whose settle may run concurrently with its
// receive and with itself, on settlers() goroutines.
type asyncSettler interface {
	settlers() int
}

// readStamp reads the stamp from application properties.
func readStamp(props map[string]any) (run string, seq uint64, sent time.Time, ok bool) {
	run, ok1 := props[propRun].(string)
	s, ok2 := props[propSeq].(int64)
	ns, ok3 := props[propSent].(int64)
	if !ok1 || !ok2 || !ok3 || s <= 0 {
		return "", 0, time.Time{}, false
	}
	return run, uint64(s), time.Unix(0, ns), true
}

// Stamp returns the application properties that mark message seq of run
// runID, sent at sent: what every message of a run carries, for a
// [Ledger] to account it when it arrives (see [ReadStamp]).
func Stamp(runID string, seq uint64, sent time.Time) map[string]any {
	return stampProps(runID, outMsg{seq: seq, sent: sent})
}

// ReadStamp reads what [Stamp] put in a message's application
// properties; ok is false when they carry no stamp.
func ReadStamp(props map[string]any) (runID string, seq uint64, sent time.Time, ok bool) {
	return readStamp(props)
}

func stampProps(runID string, m outMsg) map[string]any {
	return map[string]any{propRun: runID, propSeq: int64(m.seq), propSent: m.sent.UnixNano()}
}
