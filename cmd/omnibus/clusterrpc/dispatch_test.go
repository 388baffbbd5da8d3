package clusterrpc

import (
	"bytes"
	"context"
	"runtime"
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
func TestSendAsyncIsDecodedFromTheReadBuffer(t *testing.T) {
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
