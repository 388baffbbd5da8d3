package frames

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Raw encodings for the forms a marshaller of ours never writes (32-bit
// lists and maps, the 0x56 boolean, a ulong descriptor, a symbol
// address) but a client may.
func rawSection(code byte, value []byte) []byte {
	return append([]byte{encoding.TypeCodeDescribed, encoding.TypeCodeSmallUlong, code}, value...)
}

func rawSectionUlong(code byte, value []byte) []byte {
	return append([]byte{encoding.TypeCodeDescribed, encoding.TypeCodeUlong, 0, 0, 0, 0, 0, 0, 0, code}, value...)
}

func rawList32(elems ...[]byte) []byte {
	content := bytes.Join(elems, nil)
	b := []byte{encoding.TypeCodeList32}
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)+4))
	b = binary.BigEndian.AppendUint32(b, uint32(len(elems)))
	return append(b, content...)
}

func rawMap32(elems ...[]byte) []byte {
	b := rawList32(elems...)
	b[0] = encoding.TypeCodeMap32
	return b
}

func rawVar(code byte, s string) []byte { return append([]byte{code, byte(len(s))}, s...) }

// storeShapes are messages of every shape a client may send, each with
// whether the fast path takes it (rather than leaving it to the general
// decoder).
func storeShapes(t testing.TB) []struct {
	name string
	enc  []byte
	fast bool
} {
	t.Helper()
	now := time.UnixMilli(1700000000123).UTC()
	null := []byte{encoding.TypeCodeNull}
	u64 := binary.BigEndian.AppendUint64([]byte{encoding.TypeCodeUlong}, 1<<40)
	ts := binary.BigEndian.AppendUint64([]byte{encoding.TypeCodeTimestamp}, uint64(now.UnixMilli()))
	data8 := rawSection(byte(codeData), rawVar(encoding.TypeCodeVbin8, "body"))
	benchProps := encoding.Map{{Key: "run", Value: "r-1"}, {Key: "seq", Value: int64(7)}, {Key: "sent", Value: int64(1700000000123456789)}}
	data32 := rawSection(byte(codeData), append([]byte{encoding.TypeCodeVbin32, 0, 0, 0, 3}, "abc"...))
	m := func(m *Message) []byte { return mustMarshalMessage(t, m) }
	full := fullMessage() // its body and footer short enough to change every byte of
	full.Data, full.Footer = [][]byte{[]byte("hello")}, nil
	return []struct {
		name string
		enc  []byte
		fast bool
	}{
		{"bench send", m(&Message{Header: &MessageHeader{Durable: true, Priority: DefaultPriority},
			ApplicationProperties: benchProps, Data: [][]byte{bytes.Repeat([]byte{'x'}, 1024)}}), true},
		{"empty", nil, true},
		{"data only", m(&Message{Data: [][]byte{[]byte("hello")}}), true},
		{"empty data", m(&Message{Data: [][]byte{{}}}), true},
		{"several data sections", bytes.Join([][]byte{m(&Message{Data: [][]byte{[]byte("a")}}), data32, m(&Message{Data: [][]byte{{}}})}, nil), true},
		{"full", bytes.Join([][]byte{m(full), data32, m(&Message{Footer: encoding.Map{{Key: encoding.Symbol("f"), Value: true}}})}, nil), true},
		{"header only", m(&Message{Header: &MessageHeader{Priority: DefaultPriority}}), true},
		{"header every field", m(&Message{Header: &MessageHeader{Durable: true, Priority: 0, TTL: 1 << 30, FirstAcquirer: true, DeliveryCount: 70000}}), true},
		{"header list0", rawSection(byte(codeMessageHeader), []byte{encoding.TypeCodeList0}), true},
		{"header list32, bool 0x56, ushort ttl", rawSection(byte(codeMessageHeader), rawList32(
			[]byte{encoding.TypeCodeBool, 1}, []byte{encoding.TypeCodeUbyte, 7}, []byte{encoding.TypeCodeUshort, 1, 2},
			[]byte{encoding.TypeCodeBool, 0}, []byte{encoding.TypeCodeUint0})), true},
		{"header field past the spec's", rawSection(byte(codeMessageHeader), rawList32(null, null, null, null, null, []byte{encoding.TypeCodeBoolTrue})), false},
		{"header priority as uint", rawSection(byte(codeMessageHeader), rawList32(null, []byte{encoding.TypeCodeSmallUint, 7})), false},
		{"ulong descriptors", append(rawSectionUlong(byte(codeMessageHeader), []byte{encoding.TypeCodeList0}),
			rawSectionUlong(byte(codeData), rawVar(encoding.TypeCodeVbin8, "x"))...), true},
		{"string id", m(&Message{Properties: &MessageProperties{MessageID: "5f0b3c5e-1f5e-4a51", CorrelationID: "c"}}), true},
		{"ulong ids", m(&Message{Properties: &MessageProperties{MessageID: uint64(0), CorrelationID: uint64(1 << 40)}}), true},
		{"small ulong id", m(&Message{Properties: &MessageProperties{MessageID: uint64(7)}}), true},
		{"uuid id", m(&Message{Properties: &MessageProperties{MessageID: encoding.UUID{1, 2, 3}, CorrelationID: encoding.UUID{9}}}), true},
		{"binary ids", m(&Message{Properties: &MessageProperties{MessageID: []byte{1, 2}, CorrelationID: []byte{}}}), true},
		{"uint id", m(&Message{Properties: &MessageProperties{MessageID: uint32(7)}}), false},
		{"list id", m(&Message{Properties: &MessageProperties{MessageID: []any{"a"}}}), false},
		{"empty user-id", m(&Message{Properties: &MessageProperties{UserID: []byte{}}}), true},
		{"properties list32, symbol addresses, wide forms", rawSection(byte(codeMessageProperties), rawList32(
			u64, rawVar(encoding.TypeCodeVbin8, "u"), rawVar(encoding.TypeCodeSym8, "to"), rawVar(encoding.TypeCodeStr8, "s"),
			rawVar(encoding.TypeCodeSym8, "rt"), null, rawVar(encoding.TypeCodeSym8, "ct"), null, ts, ts,
			rawVar(encoding.TypeCodeStr8, "g"), []byte{encoding.TypeCodeUint, 0, 0, 1, 0}, rawVar(encoding.TypeCodeSym8, "rg"))), true},
		{"properties field past the spec's", rawSection(byte(codeMessageProperties), rawList32(
			null, null, null, null, null, null, null, null, null, null, null, null, null, []byte{encoding.TypeCodeBoolTrue})), false},
		{"subject as symbol", rawSection(byte(codeMessageProperties), rawList32(null, null, null, rawVar(encoding.TypeCodeSym8, "s"))), false},
		{"application properties null", rawSection(byte(codeApplicationProperties), null), true},
		{"application properties map32", append(rawSection(byte(codeApplicationProperties),
			rawMap32(rawVar(encoding.TypeCodeStr8, "k"), rawVar(encoding.TypeCodeStr8, "v"))), data8...), true},
		{"application properties a string", rawSection(byte(codeApplicationProperties), rawVar(encoding.TypeCodeStr8, "k")), false},
		{"application properties nested", m(&Message{ApplicationProperties: encoding.Map{{Key: "l", Value: []any{int64(1), "x"}}}}), true},
		{"annotations", m(&Message{MessageAnnotations: encoding.Map{{Key: encoding.Symbol("x-opt-partition-key"), Value: "p"},
			{Key: encoding.Symbol("x-opt-scheduled-enqueue-time"), Value: now}}, Data: [][]byte{[]byte("b")}}), true},
		{"empty sections", m(&Message{DeliveryAnnotations: encoding.Map{}, MessageAnnotations: encoding.Map{}, ApplicationProperties: encoding.Map{}, Footer: encoding.Map{}}), true},
		{"value", m(&Message{Header: &MessageHeader{Priority: DefaultPriority}, BodyKind: BodyValue, Value: encoding.Map{{Key: "k", Value: []any{int64(1)}}}}), true},
		{"null value", m(&Message{BodyKind: BodyValue}), true},
		{"text value", m(&Message{Properties: &MessageProperties{MessageID: "ID:1"}, BodyKind: BodyValue, Value: "hello"}), true},
		{"sequences", m(&Message{BodyKind: BodySequence, Sequence: [][]any{{"a"}, {}}}), true},
		{"two values", append(m(&Message{BodyKind: BodyValue, Value: "a"}), m(&Message{BodyKind: BodyValue, Value: "b"})...), false},
		{"data then value", append(m(&Message{Data: [][]byte{{1}}}), m(&Message{BodyKind: BodyValue, Value: "b"})...), false},
		{"sections out of order", append(m(&Message{Data: [][]byte{{1}}}), m(&Message{Header: &MessageHeader{}})...), false},
		{"two headers", append(m(&Message{Header: &MessageHeader{}}), m(&Message{Header: &MessageHeader{}})...), false},
		{"data holds a string", rawSection(byte(codeData), rawVar(encoding.TypeCodeStr8, "s")), false},
		{"unknown section", rawSection(0x7f, null), false},
	}
}

// TestStoreFastIsGeneral checks the store decoder's fast path against the
// general decoder: every message shape it takes, and every truncation
// and every one-byte change of them, that it accepts, the general
// decoder accepts into the same Message; and it takes the shapes it is
// meant for (a fast path that gave up on everything would pass the rest).
func TestStoreFastIsGeneral(t *testing.T) {
	// Constructors and values a changed byte becomes: the ones the fast
	// path switches on, lengths one off and the extremes.
	subst := []byte{0x00, 0x01, 0x02, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x52, 0x53, 0x56, 0x60, 0x70,
		0x80, 0x83, 0x98, 0xa0, 0xa1, 0xa3, 0xb0, 0xb1, 0xb3, 0xc0, 0xc1, 0xd0, 0xd1, 0xff}
	var d StoreDecoder
	var checked, taken int
	check := func(t *testing.T, what string, in []byte) bool {
		t.Helper()
		d.Clear()
		d.used = true // as Decode marks it
		if !d.unmarshalFast(in) {
			return false
		}
		checked++
		general, err := UnmarshalMessageSharing(in)
		if err != nil {
			t.Fatalf("%s: the fast path accepted what the general decoder refuses (%v):\n% x", what, err, in)
		}
		if diff := cmp.Diff(general, &d.m); diff != "" {
			t.Fatalf("%s: the fast path decoded otherwise (-general +fast):\n%s\n% x", what, diff, in)
		}
		return true
	}
	for _, s := range storeShapes(t) {
		t.Run(s.name, func(t *testing.T) {
			if got := check(t, "as sent", s.enc); got != s.fast {
				t.Fatalf("fast path took it: %v, want %v", got, s.fast)
			}
			// And through Decode, fast or not, as UnmarshalMessageSharing.
			got, err := d.Decode(s.enc)
			want, wantErr := UnmarshalMessageSharing(s.enc)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("Decode: %v, UnmarshalMessageSharing: %v", err, wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("Decode differs (-general +Decode):\n%s", diff)
				}
			}
			in := s.enc
			if len(in) > 600 { // a long body's every byte adds nothing
				in = in[:600]
			}
			for n := range len(in) {
				check(t, "truncated", in[:n])
			}
			changed := make([]byte, len(in))
			for i := range in {
				for _, b := range append(subst, in[i]+1, in[i]-1) {
					copy(changed, in)
					changed[i] = b
					if check(t, "changed", changed) {
						taken++
					}
				}
			}
		})
	}
	t.Logf("%d decodes the fast path took compared with the general decoder (%d of them of changed bytes)", checked, taken)
}
