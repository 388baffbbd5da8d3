package amqpserver

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// pulledTestMessages are messages of every shape a pull delivers, in an
// order where each differs from the one before in what it sets: encoded
// or decoded application properties or none, a lock token or none, a
// data body, an empty one or an AMQP value, a session, a large body.
func pulledTestMessages(t testing.TB, n int) []*core.Message {
	t.Helper()
	var props buffer.Buffer
	if err := encoding.WriteMap(&props, encoding.Map{{Key: "bench-run", Value: "6f1c2d9e"}, {Key: "bench-seq", Value: int64(7)}}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]*core.Message, n)
	for i := range msgs {
		m := &core.Message{
			MessageID: fmt.Sprintf("id-%d", i), SequenceNumber: int64(i + 1), EnqueuedTime: time.Unix(1700000000, 0).UTC(),
			Durable: i%2 == 0, Priority: 4, Body: bytes.Repeat([]byte{byte(i)}, 1024),
		}
		switch i % 5 {
		case 0:
			m.EncodedProperties = core.EncodedProperties{Codec: propertyCodecID, Bytes: props.Bytes(), Size: 30}
			m.LockToken, m.LockedUntil = core.LockToken{byte(i), 2, 3}, time.Unix(1700000060, 0).UTC()
		case 1:
			m.ApplicationProperties = map[string]any{"k": int64(i), "s": "v"}
			m.SessionID = "s1"
		case 2:
			m.Body = nil
			m.LockToken = core.LockToken{byte(i)}
		case 3:
			m.BodyType = core.BodyAMQP
			m.Body = []byte{0x00, 0x53, 0x77, 0xa1, 0x02, 'h', 'i'} // amqp-value "hi"
		case 4:
			m.Body = bytes.Repeat([]byte{byte(i)}, 70<<10)
			m.CorrelationID = "c"
		}
		msgs[i] = m
	}
	return msgs
}

// TestEncodePulledIsEncodeDelivery checks that each payload of a pull,
// whose heads are encoded one after another into one scratch and share
// allocations, carries exactly the bytes encodeDelivery makes of its
// message alone, in order; that a message that cannot be encoded is
// reported with its lock token and leaves the others whole; and that the
// shared heads do not overlap.
func TestEncodePulledIsEncodeDelivery(t *testing.T) {
	msgs := pulledTestMessages(t, 41)
	bad := 17
	msgs[bad].ApplicationProperties = map[string]any{"ch": make(chan int)} // no AMQP encoding
	msgs[bad].LockToken = core.LockToken{0xee}
	var want [][]byte
	for i, m := range msgs {
		if i == bad {
			if _, err := encodeDelivery(m, true); err == nil {
				t.Fatal("encodeDelivery encoded a channel property")
			}
			continue
		}
		enc, err := encodeDelivery(m, true)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, enc)
	}
	batch, failed := encodePulled(msgs, true)
	if len(failed) != 1 || failed[0].token != (core.LockToken{0xee}) {
		t.Fatalf("failed = %v, want the one message with token ee", failed)
	}
	if len(batch) != len(want) {
		t.Fatalf("%d payloads, want %d", len(batch), len(want))
	}
	for i, pm := range batch {
		got := append(append([]byte(nil), pm.payload.head...), pm.payload.body...)
		if !bytes.Equal(got, want[i]) {
			t.Errorf("payload %d (seq %d): %d bytes differ from encodeDelivery's %d", i, pm.seq, len(got), len(want[i]))
		}
	}
	for i := range batch {
		h := batch[i].payload.head
		if len(h) > 0 && cap(h) != len(h) {
			t.Errorf("payload %d: head has room beyond it (cap %d, len %d): an append would write over the next", i, cap(h), len(h))
		}
	}
}

// TestEncodePulledSharesHeads counts a pull's allocations: its batch and
// one allocation per sharedHeads bytes of encoded sections, not one per
// delivery.
func TestEncodePulledSharesHeads(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are only meaningful without -race (make allocs)")
	}
	tmpl := pulledTestMessages(t, 16)
	for _, m := range tmpl { // every one a 1 KiB data body, locked
		m.BodyType, m.Body, m.ApplicationProperties = core.BodyBinary, make([]byte, 1024), nil
		m.LockToken = core.LockToken{1}
	}
	msgs := make([]*core.Message, len(tmpl))
	copy(msgs, tmpl)
	batch, _ := encodePulled(msgs, true)
	heads := 0
	for _, pm := range batch {
		heads += len(pm.payload.head)
	}
	n := testing.AllocsPerRun(50, func() {
		copy(msgs, tmpl)
		encodePulled(msgs, true)
	})
	if want := 1 + float64(heads/sharedHeads+1); n > want {
		t.Errorf("encodePulled of %d deliveries (%d bytes of sections) allocates %v times, want at most %v", len(tmpl), heads, n, want)
	}
}
