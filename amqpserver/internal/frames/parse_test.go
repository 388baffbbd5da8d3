package frames

import (
	"bytes"
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// frameWith wraps a body in an AMQP frame header of the right size.
func frameWith(typ Type, body ...byte) []byte {
	n := HeaderSize + len(body)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 2, byte(typ), 0, 0}, body...)
}

func TestParseFrameMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short header", []byte{0, 0, 0, 8, 2}, ErrMalformed},
		{"size below header", []byte{0, 0, 0, 7, 2, 0, 0, 0}, ErrFrameTooSmall},
		{"data offset below 2", []byte{0, 0, 0, 8, 1, 0, 0, 0}, ErrFrameTooSmall},
		{"data offset beyond frame", []byte{0, 0, 0, 8, 3, 0, 0, 0}, ErrMalformed},
		{"unknown frame type", []byte{0, 0, 0, 8, 2, 9, 0, 0}, ErrMalformed},
		{"size mismatch", []byte{0, 0, 0, 9, 2, 0, 0, 0}, ErrMalformed},
		{"not described", frameWith(TypeAMQP, 0x45), ErrMalformed},
		{"unknown performative", frameWith(TypeAMQP, 0x00, 0x53, 0x30, 0x45), ErrMalformed},
		{"symbolic descriptor", frameWith(TypeAMQP, 0x00, 0xa3, 1, 'x', 0x45), ErrMalformed},
		{"open without container-id", frameWith(TypeAMQP, 0x00, 0x53, 0x10, 0x45), ErrMalformed},
		{"open null container-id", frameWith(TypeAMQP, 0x00, 0x53, 0x10, 0xc0, 0x02, 0x01, 0x40), ErrMalformed},
		{"open container-id wrong type", frameWith(TypeAMQP, 0x00, 0x53, 0x10, 0xc0, 0x02, 0x01, 0x43), ErrMalformed},
		{"begin missing windows", frameWith(TypeAMQP, 0x00, 0x53, 0x11, 0xc0, 0x03, 0x02, 0x40, 0x43), ErrMalformed},
		{"attach missing role", frameWith(TypeAMQP, 0x00, 0x53, 0x12, 0xc0, 0x05, 0x02, 0xa1, 0x01, 'n', 0x43), ErrMalformed},
		{"flow missing fields", frameWith(TypeAMQP, 0x00, 0x53, 0x13, 0x45), ErrMalformed},
		{"transfer missing handle", frameWith(TypeAMQP, 0x00, 0x53, 0x14, 0x45), ErrMalformed},
		{"disposition missing first", frameWith(TypeAMQP, 0x00, 0x53, 0x15, 0xc0, 0x02, 0x01, 0x41), ErrMalformed},
		{"detach missing handle", frameWith(TypeAMQP, 0x00, 0x53, 0x16, 0x45), ErrMalformed},
		{"error missing condition", frameWith(TypeAMQP, 0x00, 0x53, 0x18, 0xc0, 0x04, 0x01, 0x00, 0x53, 0x1d), ErrMalformed},
		{"close error not an error", frameWith(TypeAMQP, 0x00, 0x53, 0x18, 0xc0, 0x05, 0x01, 0x00, 0x53, 0x24, 0x45), ErrMalformed},
		{"disposition unknown state", frameWith(TypeAMQP, 0x00, 0x53, 0x15, 0xc0, 0x08, 0x05, 0x41, 0x43, 0x40, 0x40, 0x00, 0x53, 0x99, 0x45), ErrMalformed},
		{"list size beyond frame", frameWith(TypeAMQP, 0x00, 0x53, 0x18, 0xd0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), ErrMalformed},
		{"trailing bytes after close", frameWith(TypeAMQP, 0x00, 0x53, 0x18, 0x45, 0x40), ErrMalformed},
		{"sasl body in amqp frame", frameWith(TypeAMQP, 0x00, 0x53, 0x44, 0xc0, 0x02, 0x01, 0x50, 0x00), ErrMalformed},
		{"amqp body in sasl frame", frameWith(TypeSASL, 0x00, 0x53, 0x18, 0x45), ErrMalformed},
		{"sasl mechanisms missing", frameWith(TypeSASL, 0x00, 0x53, 0x40, 0x45), ErrMalformed},
		{"sasl outcome missing code", frameWith(TypeSASL, 0x00, 0x53, 0x44, 0x45), ErrMalformed},
		{"sasl challenge missing", frameWith(TypeSASL, 0x00, 0x53, 0x42, 0x45), ErrMalformed},
		{"received missing offset", frameWith(TypeAMQP, 0x00, 0x53, 0x15, 0xc0, 0x0b, 0x05, 0x41, 0x43, 0x40, 0x40, 0x00, 0x53, 0x23, 0xc0, 0x02, 0x01, 0x43), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFrame(tt.in)
			if !errors.Is(err, tt.want) {
				t.Errorf("ParseFrame(% x) = %#v, %v; want %v", tt.in, f, err, tt.want)
			}
		})
	}
}

func TestParseHeaderSkipsExtendedHeader(t *testing.T) {
	in := []byte{0, 0, 0, 0x10, 3, 0, 0, 5, 0xaa, 0xbb, 0xcc, 0xdd, 0x00, 0x53, 0x18, 0x45}
	r := buffer.New(in)
	h, err := ParseHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	if h.DataOffset != 3 || h.Channel != 5 || h.Size != 16 {
		t.Errorf("header %+v", h)
	}
	if !bytes.Equal(r.Bytes(), []byte{0x00, 0x53, 0x18, 0x45}) {
		t.Errorf("body % x", r.Bytes())
	}
	f, err := ParseFrame(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Body.(*Close); !ok || f.Channel != 5 {
		t.Errorf("frame %#v", f)
	}
}

func TestParseBodyEmptyIsHeartbeat(t *testing.T) {
	b, err := ParseBody(buffer.New(nil))
	if b != nil || err != nil {
		t.Errorf("ParseBody(empty) = %v, %v; want nil, nil", b, err)
	}
}

func TestProtocolHeaders(t *testing.T) {
	for _, h := range []ProtocolHeader{AMQPHeader, SASLHeader, TLSHeader} {
		var w buffer.Buffer
		WriteProtocolHeader(&w, h)
		got, err := ParseProtocolHeader(w.Bytes())
		if err != nil || got != h {
			t.Errorf("round trip of %v = %v, %v", h, got, err)
		}
	}
	if b := SASLHeader.Bytes(); !bytes.Equal(b[:], []byte("AMQP\x03\x01\x00\x00")) {
		t.Errorf("SASL header bytes % x", b)
	}
	if b := AMQPHeader.Bytes(); !bytes.Equal(b[:], []byte("AMQP\x00\x01\x00\x00")) {
		t.Errorf("AMQP header bytes % x", b)
	}
	old, err := ParseProtocolHeader([]byte("AMQP\x01\x01\x00\x0a")) // AMQP 0-10
	if err != nil || old == AMQPHeader {
		t.Errorf("0-10 header parsed as %v, %v", old, err)
	}
	for _, bad := range [][]byte{[]byte("GET / HT"), []byte("AMQP"), nil} {
		if _, err := ParseProtocolHeader(bad); !errors.Is(err, ErrProtocolHeader) {
			t.Errorf("ParseProtocolHeader(%q) = %v, want ErrProtocolHeader", bad, err)
		}
	}
	if s := SASLHeader.String(); s != "AMQP 3 1.0.0" {
		t.Errorf("String() = %q", s)
	}
}
