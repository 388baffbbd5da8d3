package frames

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// MarshalBodyApart's output followed by the body it hands back is
// MarshalAMQP's encoding, byte for byte, whatever the body; it leaves
// out exactly the body's bytes when they end the message.
func TestMarshalBodyApartIsMarshalAMQP(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 70000) // a vbin32 length
	noFooter := fullMessage()
	noFooter.Footer = nil
	tests := []struct {
		name  string
		m     *Message
		apart []byte // the bytes expected apart
	}{
		{"one data section", &Message{Header: &MessageHeader{Durable: true}, BodyKind: BodyData, Data: [][]byte{[]byte("hello")}}, []byte("hello")},
		{"one large data section", &Message{ApplicationProperties: encoding.Map{{Key: "a", Value: int64(1)}}, Data: [][]byte{big}}, big},
		{"one empty data section", &Message{Data: [][]byte{{}}}, []byte{}},
		{"raw body", &Message{Properties: &MessageProperties{MessageID: "m"}, RawBody: []byte{0x00, 0x53, 0x77, 0xa1, 0x01, 'x'}}, []byte{0x00, 0x53, 0x77, 0xa1, 0x01, 'x'}},
		{"two data sections", noFooter, nil},
		{"footer after the body", fullMessage(), nil},
		{"value", &Message{BodyKind: BodyValue, Value: "v"}, nil},
		{"sequence", &Message{BodyKind: BodySequence, Sequence: [][]any{{"a"}}}, nil},
		{"no body", &Message{Header: &MessageHeader{Priority: DefaultPriority}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := mustMarshalMessage(t, tt.m)
			var w buffer.Buffer
			apart, err := tt.m.MarshalBodyApart(&w)
			if err != nil {
				t.Fatalf("MarshalBodyApart: %v", err)
			}
			if (apart == nil) != (tt.apart == nil) || !bytes.Equal(apart, tt.apart) {
				t.Fatalf("bytes apart: got %d bytes (nil %t), want %d (nil %t)", len(apart), apart == nil, len(tt.apart), tt.apart == nil)
			}
			if got := append(w.Bytes(), apart...); !bytes.Equal(got, want) {
				t.Errorf("written + apart differs from MarshalAMQP:\n got % x\nwant % x", got, want)
			}
		})
	}
}
