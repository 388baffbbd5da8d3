package amqpserver

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// propertiesSection encodes props as the value of an
// application-properties section.
func propertiesSection(t testing.TB, props encoding.Map) []byte {
	t.Helper()
	var w buffer.Buffer
	if err := encoding.WriteMap(&w, props); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// decodedAsBefore is what a send made of an application-properties
// section before sections were kept as they arrived: its decode into
// core's map, or the error that refused the message.
func decodedAsBefore(raw []byte) (map[string]any, error) {
	var pd propsDecoder
	err := (&frames.Message{RawApplicationProperties: raw}).DecodeApplicationProperties(&pd)
	return pd.props, err
}

// A section of distinct string keys and scalar values goes to the broker
// as it arrived, with the size core counts for its decoded form, and is
// delivered byte for byte as it arrived; it decodes, for whatever in the
// broker reads it, to what a send decoded before. Every other section is
// decoded at the send as before, refused where it was refused.
func TestPropertiesKeptAsTheyArrived(t *testing.T) {
	many := func(n int) encoding.Map {
		var m encoding.Map
		for i := range n {
			m = append(m, encoding.KeyValue{Key: fmt.Sprintf("k%02d", i), Value: int32(i)})
		}
		return m
	}
	str32 := append([]byte{encoding.TypeCodeMap8, 8, 2, encoding.TypeCodeStr32, 0, 0, 0, 1, 'k'}, encoding.TypeCodeNull)
	kept := map[string][]byte{
		"every scalar": propertiesSection(t, encoding.Map{
			{Key: "null", Value: nil}, {Key: "bool", Value: true}, {Key: "false", Value: false},
			{Key: "ubyte", Value: uint8(200)}, {Key: "ushort", Value: uint16(60000)}, {Key: "uint", Value: uint32(1 << 31)},
			{Key: "uint0", Value: uint32(0)}, {Key: "ulong", Value: uint64(1 << 63)}, {Key: "byte", Value: int8(-5)},
			{Key: "short", Value: int16(-300)}, {Key: "int", Value: int32(-70000)}, {Key: "smallint", Value: int32(-1)},
			{Key: "long", Value: int64(-1 << 40)}, {Key: "smalllong", Value: int64(3)}, {Key: "float", Value: float32(1.5)},
			{Key: "double", Value: 2.25}, {Key: "timestamp", Value: msgTime}, {Key: "uuid", Value: encoding.UUID{9}},
			{Key: "string", Value: "text"}, {Key: "binary", Value: []byte{0, 1, 2}}, {Key: "symbol", Value: encoding.Symbol("sym")},
			{Key: "timespan", Value: encoding.Described{Descriptor: timeSpanDescriptor, Value: int64(15_000_000)}},
			{Key: "", Value: "empty key"},
		}),
		"the bench's three": propertiesSection(t, encoding.Map{
			{Key: "bench-run", Value: "6f1c2d9e4b7a4c0e"}, {Key: "bench-seq", Value: int64(123456)}, {Key: "bench-sent", Value: int64(1795000000123456789)},
		}),
		"a str32 key":               str32,
		"as many as may be kept":    propertiesSection(t, many(maxPlainProperties)),
		"a timespan as a smalllong": propertiesSection(t, encoding.Map{{Key: "ts", Value: encoding.Described{Descriptor: timeSpanDescriptor, Value: int64(-2)}}}),
	}
	none := map[string][]byte{
		"an empty map": propertiesSection(t, encoding.Map{}),
		"null":         {encoding.TypeCodeNull},
	}
	decoded := map[string][]byte{
		"a list":             propertiesSection(t, encoding.Map{{Key: "l", Value: []any{"a", int32(1)}}}),
		"a map":              propertiesSection(t, encoding.Map{{Key: "m", Value: encoding.Map{{Key: "k", Value: int64(2)}}}}),
		"an array":           propertiesSection(t, encoding.Map{{Key: "a", Value: encoding.Array{Type: encoding.TypeCodeInt, Elems: []any{int32(1), int32(2)}}}}),
		"a repeated key":     propertiesSection(t, encoding.Map{{Key: "k", Value: int32(1)}, {Key: "k", Value: int32(2)}}),
		"more than are kept": propertiesSection(t, many(maxPlainProperties+1)),
	}
	refused := map[string][]byte{
		"a char":                   propertiesSection(t, encoding.Map{{Key: "c", Value: encoding.Char('x')}}),
		"a decimal":                propertiesSection(t, encoding.Map{{Key: "d", Value: encoding.Decimal64{}}}),
		"another described value":  propertiesSection(t, encoding.Map{{Key: "d", Value: encoding.Described{Descriptor: uint64(1), Value: "x"}}}),
		"a timespan out of range":  propertiesSection(t, encoding.Map{{Key: "ts", Value: encoding.Described{Descriptor: timeSpanDescriptor, Value: int64(math.MaxInt64)}}}),
		"a timespan that is a int": propertiesSection(t, encoding.Map{{Key: "ts", Value: encoding.Described{Descriptor: timeSpanDescriptor, Value: int32(5)}}}),
		"a symbol key":             propertiesSection(t, encoding.Map{{Key: encoding.Symbol("k"), Value: int32(1)}}),
		"a truncated value":        {encoding.TypeCodeMap8, 4, 2, encoding.TypeCodeStr8, 0, encoding.TypeCodeLong},
		"a string that runs over":  {encoding.TypeCodeMap8, 6, 2, encoding.TypeCodeStr8, 0, encoding.TypeCodeStr8, 9, 'x'},
		"an odd count":             {encoding.TypeCodeMap8, 3, 1, encoding.TypeCodeStr8, 0},
		"trailing bytes":           {encoding.TypeCodeMap8, 5, 2, encoding.TypeCodeStr8, 0, encoding.TypeCodeNull, encoding.TypeCodeNull},
		"trailing bytes, no entry": {encoding.TypeCodeMap8, 2, 0, encoding.TypeCodeNull},
		"not a map":                {encoding.TypeCodeStr8, 1, 'x'},
	}
	send := func(raw []byte) (*core.Message, error) {
		// The section after a header, before a body, as clients send it.
		msg := append([]byte{0x00, 0x53, 0x70, 0x45, 0x00, 0x53, 0x74}, raw...)
		msg = append(msg, 0x00, 0x53, 0x75, 0xa0, 0x01, 'b')
		msgs, err := decodeMessage(msg, 0)
		if err != nil {
			return nil, err
		}
		return msgs[0], nil
	}
	for name, raw := range kept {
		t.Run("kept/"+name, func(t *testing.T) {
			m, err := send(raw)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodedAsBefore(raw)
			if err != nil {
				t.Fatal(err)
			}
			if m.ApplicationProperties != nil || m.EncodedProperties.Codec != propertyCodecID || !bytes.Equal(m.EncodedProperties.Bytes, raw) {
				t.Fatalf("properties %v, encoded %+v; want the section as it arrived", m.ApplicationProperties, m.EncodedProperties)
			}
			if size := (&core.Message{ApplicationProperties: want}).Size(); m.EncodedProperties.Size != size {
				t.Errorf("accounted size %d, want %d (the decoded properties')", m.EncodedProperties.Size, size)
			}
			got, err := m.Properties()
			if err != nil || !cmp.Equal(got, want) {
				t.Errorf("decoded for the broker: %v, %v; want %v", got, err, want)
			}
			out, err := encodeDelivery(m, false)
			if err != nil {
				t.Fatal(err)
			}
			if section := append([]byte{0x00, 0x53, 0x74}, raw...); !bytes.Contains(out, section) {
				t.Errorf("the delivery does not carry the section as it arrived")
			}
		})
	}
	for name, raw := range none {
		t.Run("none/"+name, func(t *testing.T) {
			m, err := send(raw)
			if err != nil || m.ApplicationProperties != nil || m.EncodedProperties.Bytes != nil {
				t.Fatalf("%v, %v, %+v; want no properties", err, m.ApplicationProperties, m.EncodedProperties)
			}
		})
	}
	for name, raw := range decoded {
		t.Run("decoded/"+name, func(t *testing.T) {
			m, err := send(raw)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := decodedAsBefore(raw)
			if m.EncodedProperties.Bytes != nil || !cmp.Equal(m.ApplicationProperties, want) {
				t.Errorf("properties %v, encoded %+v; want %v, decoded", m.ApplicationProperties, m.EncodedProperties, want)
			}
		})
	}
	for name, raw := range refused {
		t.Run("refused/"+name, func(t *testing.T) {
			_, before := decodedAsBefore(raw)
			_, err := send(raw)
			if err == nil || before == nil || err.Error() != before.Error() {
				t.Errorf("send: %v; before: %v; want both refused alike", err, before)
			}
		})
	}
}

// FuzzPlainProperties: whatever section plainProperties keeps as it
// arrived is one the decode accepts (so nothing refused before is
// stored now), with as many entries and the accounted size core counts
// for the decoded map.
func FuzzPlainProperties(f *testing.F) {
	for _, m := range []encoding.Map{
		{{Key: "bench-run", Value: "6f1c2d9e4b7a4c0e"}, {Key: "bench-seq", Value: int64(123456)}},
		{{Key: "t", Value: msgTime}, {Key: "u", Value: encoding.UUID{1}}, {Key: "b", Value: []byte{1}}, {Key: "n", Value: nil}},
		{{Key: "ts", Value: encoding.Described{Descriptor: timeSpanDescriptor, Value: int64(15_000_000)}}},
		{{Key: "k", Value: int32(1)}, {Key: "k", Value: int32(2)}},
		{{Key: "l", Value: []any{"a"}}},
		{{Key: "c", Value: encoding.Char('x')}, {Key: "d", Value: encoding.Decimal32{}}, {Key: "e", Value: encoding.Decimal128{}}},
		{{Key: "d", Value: encoding.Described{Descriptor: uint64(1), Value: "x"}}},
	} {
		f.Add(propertiesSection(f, m))
	}
	f.Add([]byte{encoding.TypeCodeNull})
	f.Add([]byte{encoding.TypeCodeMap8, 4, 2, encoding.TypeCodeStr8, 0, encoding.TypeCodeLong})
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, size, ok := plainProperties(raw)
		if wn, wsize, wok := plainPropertiesByEntry(raw); n != wn || size != wsize || ok != wok {
			t.Fatalf("one pass: %d entries of %d bytes, %v; the entry-by-entry walk: %d, %d, %v", n, size, ok, wn, wsize, wok)
		}
		if !ok {
			return
		}
		props, err := decodedAsBefore(raw)
		if err != nil {
			t.Fatalf("kept as it arrived, but the decode refuses it: %v", err)
		}
		if len(props) != n {
			t.Fatalf("%d entries counted, %d decoded", n, len(props))
		}
		if want := (&core.Message{ApplicationProperties: props}).Size(); size != want {
			t.Fatalf("accounted size %d, the decoded properties' %d", size, want)
		}
		back, err := propertyCodec{}.DecodeProperties(raw)
		if err != nil || !cmp.Equal(back, props, cmpopts.EquateNaNs()) {
			t.Fatalf("the codec decodes %v, %v; want %v", back, err, props)
		}
	})
}

// Sections as an SDK sends them go through plainProperties without
// allocating.
func TestPlainPropertiesAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates on its own")
	}
	raw := propertiesSection(t, encoding.Map{{Key: "bench-run", Value: "6f1c2d9e4b7a4c0e"},
		{Key: "bench-seq", Value: int64(123456)}, {Key: "at", Value: time.Unix(0, 0)}})
	if n := testing.AllocsPerRun(100, func() { plainProperties(raw) }); n != 0 {
		t.Errorf("%v allocations, want none", n)
	}
}
