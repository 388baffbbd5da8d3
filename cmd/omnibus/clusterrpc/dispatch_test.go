package clusterrpc

import (
	"bytes"
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// An asynchronous send is decoded on the reading goroutine, into messages
// of their own: its arguments are not copied out of the read buffer
// first, and the messages the broker keeps share nothing with that
// buffer, which the next frame overwrites.
func TestSendAsyncAllocatesOneCopy(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute})
	s := NewServer(func(g uint64) (Group, bool) {
		return Group{Broker: env.Broker, Valid: func() bool { return true }}, g == 1
	}, zaptest.NewLogger(t))
	c := &serverConn{s: s, fc: newHeldFrameConn(), calls: map[uint64]context.CancelFunc{}}
	request := func(id uint64, path string, body []byte) []byte {
		e := &enc{}
		e.uvarint(id)
		e.byte(opSendAsync)
		e.uvarint(1)
		e.string(path)
		e.messages([]*core.Message{{Body: body}})
		if e.err != nil {
			t.Fatal(e.err)
		}
		return e.b
	}

	// The broker keeps what was decoded, not the read buffer.
	body := bytes.Repeat([]byte{'b'}, 1000)
	payload := request(1, "q", body)
	if !c.dispatch(payload) {
		t.Fatal("dispatch refused a well-formed send")
	}
	clear(payload) // what the reader does with its buffer for the next frame
	// Receive waits for the send to commit.
	got, err := env.Broker.Receive(t.Context(), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 1})
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Body, body) {
		t.Fatalf("the send stored %d messages (%v), body intact %v", len(got), err, len(got) == 1 && bytes.Equal(got[0].Body, body))
	}

	// A refused send (no such queue) costs the decoding's copy of the
	// body and no other: the arguments are not copied before.
	big := bytes.Repeat([]byte{'x'}, 256<<10)
	payload = request(2, "nope", big)
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		c.dispatch(payload)
		c.fc.pending = c.fc.pending[:0]
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > uint64(len(big))*3/2 {
		t.Errorf("dispatching a send of a %d-byte body allocates %d bytes, want under %d (one copy of the body)", len(big), per, len(big)*3/2)
	}
}

// A call's result is encoded into a pooled buffer: what serving a peek of
// ten 1 KiB messages allocates beyond the broker's own peek is well under
// the answer's size (a fresh buffer grew message by message: 3.6 times
// it).
func TestAnswerEncodingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what is put back at random (race_on_test.go); make allocs runs this without it")
	}
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute})
	msgs := benchLocked()
	for _, m := range msgs {
		env.MustSend(t, "q", &core.Message{Body: m.Body, ApplicationProperties: m.ApplicationProperties})
	}
	g := Group{Broker: env.Broker, Valid: func() bool { return true }}
	c := &serverConn{s: NewServer(nil, zaptest.NewLogger(t)), fc: newHeldFrameConn()}
	e := &enc{}
	e.string("q")
	e.varint(0)   // from
	e.uvarint(10) // max
	e.string("")  // session
	e.uvarint(0)  // max bytes
	args := e.b
	opts := core.PeekOptions{Max: 10}

	const runs = 20
	bytesPer := func(f func()) int64 {
		f() // warm the pool
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		return int64(after.TotalAlloc-before.TotalAlloc) / runs
	}
	direct := bytesPer(func() {
		if got, err := env.Broker.Peek(t.Context(), "q", opts); err != nil || len(got) != 10 {
			t.Fatalf("peek: %d messages, %v", len(got), err)
		}
	})
	c.run(t.Context(), 1, g, opPeek, args)
	frames := readQueued(t, c.fc)
	d := &dec{b: frames[0]}
	if d.uvarint(); d.byte() != statusOK || len(d.messages()) != 10 || d.err != nil {
		t.Fatalf("the peek's answer does not hold ten messages (%v)", d.err)
	}
	served := bytesPer(func() {
		c.fc.pending = c.fc.pending[:0]
		c.run(t.Context(), 1, g, opPeek, args)
	})
	answer := 10 * len(msgs[0].Body)
	if served-direct > int64(answer)/2 {
		t.Errorf("serving a peek of %d bytes of messages allocates %d bytes beyond the peek's own %d, want under %d", answer, served-direct, direct, answer/2)
	}
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("the runtime does not count the goroutines it starts (%s)", s[0].Name)
	}
	return s[0].Value.Uint64()
}

// Calls one after the other run on the goroutines kept from the calls
// before (their stacks grown by the core's work), not each on a new one.
func TestCallsRunOnKeptGoroutines(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute})
	s := NewServer(func(g uint64) (Group, bool) {
		return Group{Broker: env.Broker, Valid: func() bool { return true }}, g == 1
	}, zaptest.NewLogger(t))
	t.Cleanup(s.Close)
	c := &serverConn{s: s, fc: newHeldFrameConn(), calls: map[uint64]context.CancelFunc{}}
	call := func(id uint64) {
		e := &enc{}
		e.uvarint(id)
		e.byte(opCounts)
		e.uvarint(1)
		e.string("q")
		if !c.dispatch(e.b) {
			t.Fatal("dispatch refused a well-formed call")
		}
		<-c.fc.wake // the answer is queued
		frames := readQueued(t, c.fc)
		d := &dec{b: frames[len(frames)-1]}
		if got := d.uvarint(); got != id || d.byte() != statusOK {
			t.Fatalf("call %d answered as %d, not OK", id, got)
		}
		c.fc.pending = c.fc.pending[:0]
	}
	call(1) // the first call's goroutine is new
	const calls = 100
	before := goroutinesCreated(t)
	for id := range uint64(calls) {
		call(id + 2)
	}
	if n := goroutinesCreated(t) - before; n > calls/10 {
		t.Errorf("%d calls one after the other started %d goroutines, want at most %d", calls, n, calls/10)
	}
}
