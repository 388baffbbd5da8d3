package frames

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// nestedNullArrays is an array32 of k array32 elements, each claiming
// count nulls: nine bytes per inner array, 16 bytes per null once decoded.
func nestedNullArrays(k, count int) encoding.Raw {
	be := binary.BigEndian.AppendUint32
	p := append(be(be([]byte{encoding.TypeCodeArray32}, uint32(5+9*k)), uint32(k)), encoding.TypeCodeArray32)
	for range k {
		p = append(be(be(p, 5), uint32(count)), encoding.TypeCodeNull)
	}
	return p
}

// hostileOpen is the frame of issue 14: an open whose properties map
// nests arrays of nulls, 63 KB on the wire, sent right after SASL
// ANONYMOUS. Decoding it used to allocate 437 MiB.
func hostileOpen(t testing.TB) []byte {
	return mustWrite(t, Frame{Body: &Open{ContainerID: "c", Properties: encoding.Map{
		{Key: encoding.Symbol("a"), Value: encoding.Map{{Key: encoding.Symbol("b"), Value: nestedNullArrays(6990, 4096)}}},
	}}})
}

// listOfNulls is an amqp-value body section holding a list32 of n nulls.
func listOfNullsMessage(n int) []byte {
	be := binary.BigEndian.AppendUint32
	p := be(be([]byte{0x00, 0x53, 0x77, encoding.TypeCodeList32}, uint32(4+n)), uint32(n))
	return append(p, bytes.Repeat([]byte{encoding.TypeCodeNull}, n)...)
}

func TestAllocBudgetHostileOpenFrame(t *testing.T) {
	in := hostileOpen(t)
	if len(in) < 60000 || len(in) > 65536 {
		t.Fatalf("the frame is %d bytes, want about 63 KB", len(in))
	}
	_, err := ParseFrame(in)
	if !errors.Is(err, encoding.ErrBudget) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("ParseFrame = %v, want ErrBudget (amqp:decode-error)", err)
	}
	if raceEnabled {
		t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
	}
	limit := uint64(encoding.AllocFactor*len(in) + allocSlack)
	got := bytesAllocated(3, func() { ParseFrame(in) })
	t.Logf("ParseFrame: %d bytes in, %d allocated", len(in), got)
	if got > limit {
		t.Errorf("ParseFrame allocated %d bytes for %d, want <= %d", got, len(in), limit)
	}
	got = bytesAllocated(3, func() {
		r := NewReader(bytes.NewReader(in), 1<<20)
		if _, err := r.ReadFrame(); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ReadFrame = %v", err)
		}
	})
	t.Logf("Reader.ReadFrame: %d bytes in, %d allocated", len(in), got)
	if got > limit {
		t.Errorf("ReadFrame allocated %d bytes for %d, want <= %d", got, len(in), limit)
	}
}

// TestAllocBudgetStoredMessageBody sends the other input of issue 14, a
// list of a million nulls as an amqp-value body: the broker's decode of a
// message it stores validates the body without building it.
func TestAllocBudgetStoredMessageBody(t *testing.T) {
	in := listOfNullsMessage(1 << 20)
	m, err := UnmarshalMessageSharing(in)
	if err != nil {
		t.Fatal(err)
	}
	if m.BodyKind != BodyValue || m.Value != nil || len(m.RawBody) != len(in) {
		t.Fatalf("BodyKind %d, Value %T, RawBody %d bytes; want a value body kept raw", m.BodyKind, m.Value, len(m.RawBody))
	}
	if raceEnabled {
		t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
	}
	got := bytesAllocated(3, func() { UnmarshalMessageSharing(in) })
	t.Logf("UnmarshalMessageSharing: %d bytes in, %d allocated", len(in), got)
	if got > allocSlack {
		t.Errorf("UnmarshalMessageSharing allocated %d bytes, want <= %d", got, allocSlack)
	}

	// Decoded (as $cbs and $management requests are), it costs its 16
	// bytes per null: within the budget.
	got = bytesAllocated(1, func() {
		m, err := UnmarshalMessage(in)
		if err != nil || len(m.Value.([]any)) != 1<<20 {
			t.Fatalf("UnmarshalMessage: %v", err)
		}
	})
	t.Logf("UnmarshalMessage: %d bytes in, %d allocated", len(in), got)
	if limit := uint64(encoding.AllocFactor*len(in) + allocSlack); got > limit {
		t.Errorf("UnmarshalMessage allocated %d bytes, want <= %d", got, limit)
	}
}

// TestStoredMessageBodyValidated checks that the broker's decode rejects
// every body UnmarshalMessage rejects, down to the innermost value.
func TestStoredMessageBodyValidated(t *testing.T) {
	for _, in := range [][]byte{
		{0x00, 0x53, 0x77, 0xc0, 0x02, 0x01, 0x02},             // a list holding an unknown constructor
		{0x00, 0x53, 0x77, 0xc1, 0x03, 0x02, 0x40, 0xa1},       // a map whose value is cut short
		{0x00, 0x53, 0x76, 0xc0, 0x04, 0x01, 0xe0, 0x01, 0x00}, // a sequence holding an array without constructor
		{0x00, 0x53, 0x76, 0x43},                               // a sequence that is not a list
		append(bytes.Repeat([]byte{0x00, 0x53, 0x77}, 1), bytes.Repeat([]byte{0xc0, 0x01, 0x01}, encoding.MaxDepth+1)...),
	} {
		_, err1 := UnmarshalMessage(in)
		_, err2 := UnmarshalMessageSharing(in)
		if !errors.Is(err1, ErrMalformed) || !errors.Is(err2, ErrMalformed) {
			t.Errorf("% x: UnmarshalMessage = %v, UnmarshalMessageSharing = %v; want ErrMalformed from both", in, err1, err2)
		}
	}
}

// TestAllocBudgetAllPerformatives decodes a frame of every kind the
// fuzz seeds hold within the documented bound.
func TestAllocBudgetAllPerformatives(t *testing.T) {
	if raceEnabled {
		t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
	}
	for _, body := range seedBodies() {
		in := mustWrite(t, Frame{Body: body})
		got := bytesAllocated(10, func() {
			if _, err := ParseFrame(in); err != nil {
				t.Fatalf("%T: %v", body, err)
			}
		})
		if limit := uint64(encoding.AllocFactor*len(in) + allocSlack); got > limit {
			t.Errorf("%T: %d bytes allocated for %d, want <= %d", body, got, len(in), limit)
		}
	}
}

// TestAllocBudgetBatchOfTinyMessages splits batches of the smallest
// messages there are: their structures cost far more than their bytes,
// within BatchFactor.
func TestAllocBudgetBatchOfTinyMessages(t *testing.T) {
	for _, tt := range []struct {
		name  string
		inner []byte
	}{
		{"empty", nil},
		{"header only", []byte{0x00, 0x53, 0x70, 0x45}},
		{"properties only", []byte{0x00, 0x53, 0x73, 0x45}},
		{"header, properties, empty data", []byte{0x00, 0x53, 0x70, 0x45, 0x00, 0x53, 0x73, 0x45, 0x00, 0x53, 0x75, 0xa0, 0x00}},
		{"empty value", []byte{0x00, 0x53, 0x77, 0x40}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			section := append([]byte{0x00, 0x53, 0x75, 0xa0, byte(len(tt.inner))}, tt.inner...)
			in := bytes.Repeat(section, 10000)
			batch, err := UnmarshalMessageSharing(in)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := SplitBatch(batch)
			if err != nil || len(msgs) != 10000 {
				t.Fatalf("SplitBatch: %d messages, %v", len(msgs), err)
			}
			if raceEnabled {
				t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
			}
			got := bytesAllocated(3, func() {
				batch, _ := UnmarshalMessageSharing(in)
				SplitBatch(batch)
			})
			t.Logf("%d bytes, %d allocated (%.1f per byte)", len(in), got, float64(got)/float64(len(in)))
			if limit := uint64((encoding.AllocFactor+BatchFactor)*len(in) + allocSlack); got > limit {
				t.Errorf("%d bytes allocated, want <= %d", got, limit)
			}
		})
	}
}
