package frames

import (
	"bytes"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// typicalMessage is a 1 KiB Service Bus message as the broker delivers it.
func typicalMessage() *Message {
	now := time.UnixMilli(1700000000000).UTC()
	return &Message{
		Header: &MessageHeader{Priority: DefaultPriority, DeliveryCount: 1},
		MessageAnnotations: encoding.Map{
			{Key: encoding.Symbol("x-opt-sequence-number"), Value: int64(42)},
			{Key: encoding.Symbol("x-opt-enqueued-time"), Value: now},
			{Key: encoding.Symbol("x-opt-locked-until"), Value: now.Add(time.Minute)},
		},
		Properties: &MessageProperties{MessageID: "5f0b3c5e-1f5e-4a51-9d43-2d0a6c1e8f00", ContentType: "application/json"},
		ApplicationProperties: encoding.Map{
			{Key: "tenant", Value: "contoso"},
			{Key: "attempt", Value: int32(1)},
		},
		Data: [][]byte{bytes.Repeat([]byte{'x'}, 1024)},
	}
}

func TestTransferEncodeAllocs(t *testing.T) {
	id, format := uint32(12345), uint32(0)
	tr := &Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: make([]byte, 16), MessageFormat: &format, Payload: make([]byte, 1024)}
	f := Frame{Channel: 1, Body: tr}
	var w buffer.Buffer
	w.Grow(2048)
	allocs := testing.AllocsPerRun(100, func() {
		w.Reset()
		if err := Write(&w, f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Write(transfer) allocates %v times per frame, want 0", allocs)
	}
}

func TestMessageDecodeAllocs(t *testing.T) {
	enc := mustMarshalMessage(t, typicalMessage())
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := UnmarshalMessage(enc); err != nil {
			t.Fatal(err)
		}
	})
	// Message, header, properties, two maps with boxed keys and values,
	// strings, the raw body copy and the data slice: about two dozen.
	if allocs > 30 {
		t.Errorf("UnmarshalMessage allocates %v times for a 1 KiB message, want <= 30", allocs)
	}
}

func BenchmarkWriteTransfer(b *testing.B) {
	id, format := uint32(12345), uint32(0)
	f := Frame{Channel: 1, Body: &Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: make([]byte, 16), MessageFormat: &format, Payload: make([]byte, 1024)}}
	var w buffer.Buffer
	for b.Loop() {
		w.Reset()
		if err := Write(&w, f); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadTransfer(b *testing.B) {
	id, format := uint32(12345), uint32(0)
	enc := mustWrite(b, Frame{Channel: 1, Body: &Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: make([]byte, 16), MessageFormat: &format, Payload: make([]byte, 1024)}})
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := ParseFrame(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalMessage(b *testing.B) {
	enc := mustMarshalMessage(b, typicalMessage())
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := UnmarshalMessage(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalMessage(b *testing.B) {
	m := typicalMessage()
	var w buffer.Buffer
	for b.Loop() {
		w.Reset()
		if err := m.MarshalAMQP(&w); err != nil {
			b.Fatal(err)
		}
	}
}

// typicalOpen and typicalAttach are what the Azure SDKs send.
func typicalOpen() *Open {
	return &Open{ContainerID: "5f0b3c5e1f5e4a519d432d0a6c1e8f00", Hostname: "localhost", MaxFrameSize: 65536, ChannelMax: 4999,
		IdleTimeOut: 60000, DesiredCapabilities: []encoding.Symbol{"com.microsoft:session-filter"},
		Properties: encoding.Map{
			{Key: encoding.Symbol("product"), Value: "MSGolangClient"},
			{Key: encoding.Symbol("version"), Value: "1.8.0"},
			{Key: encoding.Symbol("platform"), Value: "linux/amd64"},
			{Key: encoding.Symbol("framework"), Value: "go1.26"},
			{Key: encoding.Symbol("user-agent"), Value: "azsdk-go-azservicebus/v1.8.0 (go1.26; linux)"},
		}}
}

func typicalAttach() *Attach {
	second, first := ReceiverSettleModeSecond, SenderSettleModeUnsettled
	return &Attach{Name: "orders-receiver-5f0b3c5e", Handle: 1, Role: RoleReceiver, SndSettleMode: &first, RcvSettleMode: &second,
		Source: &Source{Address: "orders", Filter: encoding.Map{
			{Key: encoding.Symbol("com.microsoft:session-filter"), Value: encoding.Described{Descriptor: uint64(0x137000000C), Value: "session-1"}}}},
		Target:              &Target{Address: "orders-receiver-5f0b3c5e"},
		Properties:          encoding.Map{{Key: encoding.Symbol("com.microsoft:timeout"), Value: uint32(60000)}},
		DesiredCapabilities: []encoding.Symbol{"com.microsoft:session-filter"},
	}
}

func benchmarkParse(b *testing.B, body Body) {
	enc := mustWrite(b, Frame{Body: body})
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFrame(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseOpen(b *testing.B)   { benchmarkParse(b, typicalOpen()) }
func BenchmarkParseAttach(b *testing.B) { benchmarkParse(b, typicalAttach()) }

// BenchmarkUnmarshalMessageSharing is the decode of every message a client
// sends, here with an amqp-value body (a list of 100 longs).
func BenchmarkUnmarshalMessageSharing(b *testing.B) {
	m := typicalMessage()
	l := make([]any, 100)
	for i := range l {
		l[i] = int64(i * 1000)
	}
	m.Data, m.BodyKind, m.Value = nil, BodyValue, l
	enc := mustMarshalMessage(b, m)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnmarshalMessageSharing(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadTransferAllocs counts what reading a client's transfer frame
// costs: its body and the Transfer, whose delivery-id, tag and
// message-format share its allocation (transferAlloc); the cursor over
// the frame (the Reader's) and the performative's list (a ListWindow in
// that cursor) cost nothing. A disposition costs its body and itself,
// its last delivery-id included.
func TestReadTransferAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are only meaningful without -race (make allocs); see race_on_test.go")
	}
	id, format := uint32(12345), uint32(0)
	for _, c := range []struct {
		name string
		body Body
		want float64
	}{
		{"transfer", &Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: make([]byte, 16), MessageFormat: &format, Payload: make([]byte, 1024)}, 2},
		{"disposition", &Disposition{Role: RoleReceiver, First: 7, Last: &id, Settled: true, State: &Accepted{}}, 2},
	} {
		enc := mustWrite(t, Frame{Channel: 1, Body: c.body})
		stream := bytes.Repeat(enc, 102) // one, and AllocsPerRun's warm-up and 100 runs
		rd := NewReader(bytes.NewReader(stream), 1<<20)
		if _, err := rd.ReadFrame(); err != nil { // the Reader's own buffers
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := rd.ReadFrame(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != c.want {
			t.Errorf("ReadFrame(%s) allocates %v times, want %v", c.name, allocs, c.want)
		}
	}
}

// TestTransferTagsDecodeWhateverTheirLength checks the delivery-tags a
// transfer's room holds (up to 32 bytes) and those it does not (longer
// than the spec allows, taken as before) decode to the bytes sent, and
// that two decoded transfers do not share their tags.
func TestTransferTagsDecodeWhateverTheirLength(t *testing.T) {
	id := uint32(3)
	for _, n := range []int{0, 1, 16, 32, 33, 200} {
		tag := bytes.Repeat([]byte{byte(n)}, n)
		enc := mustWrite(t, Frame{Channel: 1, Body: &Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: tag, Payload: []byte("p")}})
		rd := NewReader(bytes.NewReader(bytes.Repeat(enc, 2)), 1<<20)
		var got [2]*Transfer
		for i := range got {
			f, err := rd.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			got[i] = f.Body.(*Transfer)
		}
		for i, tr := range got {
			if !bytes.Equal(tr.DeliveryTag, tag) || tr.DeliveryTag == nil || *tr.DeliveryID != id {
				t.Errorf("tag of %d bytes, transfer %d: got tag %x id %v, want %x id %d", n, i, tr.DeliveryTag, *tr.DeliveryID, tag, id)
			}
		}
		if n > 0 {
			got[0].DeliveryTag[0]++
			if got[1].DeliveryTag[0] != byte(n) {
				t.Errorf("tag of %d bytes: two decoded transfers share their tag", n)
			}
		}
	}
}

// cycleReader returns its bytes over and over, as much of them as each
// Read asks for.
type cycleReader struct {
	p []byte
	i int
}

func (c *cycleReader) Read(p []byte) (int, error) {
	n := copy(p, c.p[c.i:])
	c.i = (c.i + n) % len(c.p)
	return n, nil
}

// BenchmarkReadFrameTransfers reads transfers from a stream, as a
// connection's reader goroutine does: most are buffered whole, some
// straddle two reads of the stream. 1 KiB payloads, and frames of the
// broker's default maximum (64 KiB).
func BenchmarkReadFrameTransfers(b *testing.B) {
	for _, c := range []struct {
		name    string
		payload int
	}{{"1KiB", 1024}, {"64KiB", 65536 - 64}} {
		b.Run(c.name, func(b *testing.B) {
			id, format := uint32(12345), uint32(0)
			enc := mustWrite(b, Frame{Channel: 1, Body: &Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: make([]byte, 16), MessageFormat: &format, Payload: make([]byte, c.payload)}})
			rd := NewReader(&cycleReader{p: bytes.Repeat(enc, 64)}, 1<<20)
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rd.ReadFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadDisposition is a receiver's completion of one message.
func BenchmarkReadDisposition(b *testing.B) {
	enc := mustWrite(b, Frame{Channel: 1, Body: &Disposition{Role: RoleReceiver, First: 12345, Settled: true, State: &Accepted{}}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFrame(enc); err != nil {
			b.Fatal(err)
		}
	}
}
