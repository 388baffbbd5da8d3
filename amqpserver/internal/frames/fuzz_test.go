package frames

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// FuzzFrame feeds arbitrary bytes to a Reader. Decoding must never panic,
// and any frame it accepts must re-encode to bytes that decode to an
// identical encoding.
func FuzzFrame(f *testing.F) {
	for _, b := range []Body{
		&Open{ContainerID: "c", MaxFrameSize: 65536, OfferedCapabilities: []encoding.Symbol{"x"}},
		&Attach{Name: "l", Handle: 1, Role: RoleReceiver, Source: &Source{Address: "q", Filter: encoding.Map{
			{Key: encoding.Symbol("f"), Value: encoding.Described{Descriptor: uint64(0x137000000C), Value: "s"}}}}},
		&Transfer{Handle: 0, DeliveryID: ptr(uint32(1)), DeliveryTag: []byte{1}, Payload: []byte("p")},
		&Disposition{Role: RoleReceiver, First: 1, State: &Modified{UndeliverableHere: true}},
		&SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00a\x00b")},
	} {
		var w buffer.Buffer
		if err := Write(&w, Frame{Body: b}); err != nil {
			f.Fatal(err)
		}
		f.Add(w.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in), 4096)
		for {
			fr, err := r.ReadFrame()
			if err != nil {
				return
			}
			var w buffer.Buffer
			if err := Write(&w, fr); err != nil {
				t.Fatalf("re-encoding %#v: %v", fr, err)
			}
			again, err := ParseFrame(w.Bytes())
			if err != nil {
				t.Fatalf("decoding re-encoded % x: %v", w.Bytes(), err)
			}
			var w2 buffer.Buffer
			if err := Write(&w2, again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Bytes(), w2.Bytes()) {
				t.Fatalf("encoding not stable:\n% x\n% x", w.Bytes(), w2.Bytes())
			}
		}
	})
}

// FuzzMessage decodes arbitrary bytes as a message. It must never panic,
// and an accepted message must re-encode stably with its body verbatim.
func FuzzMessage(f *testing.F) {
	f.Add(mustMarshalMessage(f, fullMessage()))
	f.Add(mustMarshalMessage(f, &Message{BodyKind: BodyValue, Value: []any{"x", int64(1)}}))
	f.Add(mustMarshalMessage(f, &Message{BodyKind: BodySequence, Sequence: [][]any{{true}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := UnmarshalMessage(in)
		if err != nil {
			return
		}
		var w buffer.Buffer
		if err := m.MarshalAMQP(&w); err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		if m.RawBody != nil && !bytes.Contains(w.Bytes(), m.RawBody) {
			t.Fatalf("re-encoded message lacks the raw body")
		}
		m2, err := UnmarshalMessage(w.Bytes())
		if err != nil {
			t.Fatalf("decoding re-encoded % x: %v", w.Bytes(), err)
		}
		var w2 buffer.Buffer
		if err := m2.MarshalAMQP(&w2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), w2.Bytes()) {
			t.Fatalf("encoding not stable")
		}
		if m.BodyKind == BodyData {
			_, _ = SplitBatch(m) // must not panic on arbitrary data sections
		}
	})
}
