package frames

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

func TestReaderSequence(t *testing.T) {
	var w buffer.Buffer
	WriteProtocolHeader(&w, SASLHeader)
	mustW := func(f Frame) {
		if err := Write(&w, f); err != nil {
			t.Fatal(err)
		}
	}
	mustW(Frame{Body: &SASLInit{Mechanism: "ANONYMOUS"}})
	WriteProtocolHeader(&w, AMQPHeader) // pipelined after SASL, as rhea does
	mustW(Frame{Body: &Open{ContainerID: "c", MaxFrameSize: 512, ChannelMax: 1}})
	WriteHeartbeat(&w)
	mustW(Frame{Channel: 1, Body: &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), DeliveryTag: []byte{1}, MessageFormat: ptr(uint32(0)), Payload: bytes.Repeat([]byte{7}, 400)}})

	r := NewReader(bytes.NewReader(w.Bytes()), 0)
	if r.MaxFrameSize() != MinMaxFrameSize {
		t.Errorf("MaxFrameSize = %d, want %d", r.MaxFrameSize(), MinMaxFrameSize)
	}
	if h, err := r.ReadProtocolHeader(); err != nil || h != SASLHeader {
		t.Fatalf("first header %v, %v", h, err)
	}
	f, err := r.ReadFrame()
	if err != nil || f.Type != TypeSASL {
		t.Fatalf("sasl-init: %#v, %v", f, err)
	}
	if h, err := r.ReadProtocolHeader(); err != nil || h != AMQPHeader {
		t.Fatalf("second header %v, %v", h, err)
	}
	if f, err = r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Open{ContainerID: "c", MaxFrameSize: 512, ChannelMax: 1}, f.Body); diff != "" {
		t.Errorf("open (-want +got):\n%s", diff)
	}
	if f, err = r.ReadFrame(); err != nil || f.Body != nil {
		t.Fatalf("heartbeat: %#v, %v", f, err)
	}
	if f, err = r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	tr, ok := f.Body.(*Transfer)
	if !ok || len(tr.Payload) != 400 || f.Channel != 1 {
		t.Fatalf("transfer: %#v", f)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Errorf("after last frame: %v, want io.EOF", err)
	}
}

func TestReaderErrors(t *testing.T) {
	big := mustWrite(t, Frame{Body: &Transfer{Handle: 0, Payload: make([]byte, 600)}})
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"too large", big, ErrFrameTooLarge},
		{"huge size claim", []byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0}, ErrFrameTooLarge},
		{"too small", []byte{0, 0, 0, 4, 2, 0, 0, 0}, ErrFrameTooSmall},
		{"malformed body", frameWith(TypeAMQP, 0x00, 0x53, 0x10, 0x45), ErrMalformed},
		{"truncated header", []byte{0, 0, 0}, io.ErrUnexpectedEOF},
		{"truncated body", []byte{0, 0, 0, 12, 2, 0, 0, 0, 0x00}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.in), 512)
			if _, err := r.ReadFrame(); !errors.Is(err, tt.want) {
				t.Errorf("ReadFrame = %v, want %v", err, tt.want)
			}
		})
	}
	r := NewReader(bytes.NewReader(big), 512)
	r.SetMaxFrameSize(1024)
	if _, err := r.ReadFrame(); err != nil {
		t.Errorf("after raising the limit: %v", err)
	}
	r = NewReader(bytes.NewReader([]byte("HTTP/1.1")), 512)
	if _, err := r.ReadProtocolHeader(); !errors.Is(err, ErrProtocolHeader) {
		t.Errorf("ReadProtocolHeader(HTTP) = %v", err)
	}
}

func TestReaderPayloadNotReused(t *testing.T) {
	var w buffer.Buffer
	for i := range 2 {
		if err := Write(&w, Frame{Body: &Transfer{Handle: 0, Payload: []byte{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(bytes.NewReader(w.Bytes()), 512)
	f1, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if p := f1.Body.(*Transfer).Payload; !bytes.Equal(p, []byte{0}) {
		t.Errorf("first payload changed to % x by the second read", p)
	}
}

// TestReaderMaxFrameSizeAtRunTime lowers and raises the limit between
// frames, as a server does before and after a connection is authorized.
func TestReaderMaxFrameSizeAtRunTime(t *testing.T) {
	small := mustWrite(t, Frame{Body: &Transfer{Handle: 0, Payload: make([]byte, 100)}})
	big := mustWrite(t, Frame{Body: &Transfer{Handle: 0, Payload: make([]byte, 2000)}})

	r := NewReader(bytes.NewReader(append(append([]byte{}, small...), big...)), 65536)
	r.SetMaxFrameSize(600)
	if got := r.MaxFrameSize(); got != 600 {
		t.Fatalf("MaxFrameSize after lowering = %d, want 600", got)
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatalf("small frame under the lowered limit: %v", err)
	}
	if _, err := r.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("big frame under the lowered limit: %v, want ErrFrameTooLarge", err)
	}

	r.SetMaxFrameSize(100) // below the protocol minimum
	if got := r.MaxFrameSize(); got != MinMaxFrameSize {
		t.Errorf("MaxFrameSize after asking for 100 = %d, want %d", got, MinMaxFrameSize)
	}
}

// TestReaderMaxFrameSizeFromAnotherGoroutine raises the limit while the
// reader goroutine is blocked waiting for the next frame (the race detector
// checks the hand-over); the frame that follows is judged by the new limit.
func TestReaderMaxFrameSizeFromAnotherGoroutine(t *testing.T) {
	big := mustWrite(t, Frame{Body: &Transfer{Handle: 0, Payload: make([]byte, 2000)}})
	pr, pw := io.Pipe()
	defer pr.Close()
	r := NewReader(pr, 512)
	got := make(chan error, 1)
	go func() {
		_, err := r.ReadFrame()
		got <- err
	}()
	r.SetMaxFrameSize(4096)
	if _, err := pw.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("frame after raising the limit: %v", err)
	}

	go func() {
		_, err := r.ReadFrame()
		got <- err
	}()
	r.SetMaxFrameSize(512)
	go pw.Write(big) // returns at the latest when the pipe is closed below
	if err := <-got; !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame after lowering the limit: %v, want ErrFrameTooLarge", err)
	}
	pw.CloseWithError(io.ErrClosedPipe)
}

// TestReaderLargeFrameGrows reads a frame larger than eagerBody, whose
// body grows as it arrives.
func TestReaderLargeFrameGrows(t *testing.T) {
	payload := make([]byte, 3*eagerBody+123)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	enc := mustWrite(t, Frame{Body: &Transfer{Handle: 0, Payload: payload}})
	r := NewReader(bytes.NewReader(enc), 1<<20)
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Body.(*Transfer).Payload; !bytes.Equal(got, payload) {
		t.Fatalf("payload of %d bytes differs from the %d sent", len(got), len(payload))
	}
	if _, err := NewReader(bytes.NewReader(enc[:len(enc)-1]), 1<<20).ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Errorf("frame cut one byte short: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestAllocReaderUnsentBody checks that a header announcing a large frame
// with nothing after it costs at most eagerBody (plus the Reader's own
// 4 KiB read buffer).
func TestAllocReaderUnsentBody(t *testing.T) {
	enc := mustWrite(t, Frame{Body: &Transfer{Handle: 0, Payload: make([]byte, 3*eagerBody)}})
	if raceEnabled {
		t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
	}
	header := enc[:HeaderSize] // announces the whole frame, sends none of it
	got := bytesAllocated(3, func() { NewReader(bytes.NewReader(header), 1<<20).ReadFrame() })
	if limit := uint64(eagerBody + 4096 + allocSlack); got > limit {
		t.Errorf("a header announcing %d bytes allocated %d, want <= %d", len(enc), got, limit)
	}
}
