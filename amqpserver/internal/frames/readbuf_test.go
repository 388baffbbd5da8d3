package frames

import (
	"bytes"
	"io"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// chunkReader returns its chunks one per Read, as a socket returns what
// has arrived.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestReadBufferGrowsWithABusyStreamAndShrinksWhenQuiet(t *testing.T) {
	big := bytes.Repeat([]byte{1}, 1<<20)
	src := &chunkReader{chunks: [][]byte{big, {2}}}
	b := newReadBuffer(src)
	p := make([]byte, 100)
	var sizes []int
	for range 8 {
		b.r = b.w // drop what is buffered: the next Read fills
		if _, err := b.Read(p); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b.buf))
	}
	want := []int{8 << 10, 16 << 10, 32 << 10, 64 << 10, 64 << 10}
	for i, w := range want {
		if sizes[i] != w {
			t.Fatalf("buffer sizes after full reads %v, want %v first", sizes, want)
		}
	}
	src.chunks = [][]byte{{3}}
	b.r = b.w
	if n, err := b.Read(p); err != nil || n != 1 || p[0] != 3 {
		t.Fatalf("quiet read: %d %v %v", n, err, p[:n])
	}
	if len(b.buf) != minReadBuffer {
		t.Errorf("after a small read the buffer is %d bytes, want %d", len(b.buf), minReadBuffer)
	}
}

func TestFrameBuffered(t *testing.T) {
	var w buffer.Buffer
	for range 3 {
		if err := Write(&w, Frame{Channel: 1, Body: &Transfer{Handle: 0, DeliveryID: ptr(uint32(0)), Payload: bytes.Repeat([]byte{7}, 1000)}}); err != nil {
			t.Fatal(err)
		}
	}
	all := w.Bytes()
	one := len(all) / 3
	// The first read brings one frame and half of the second.
	src := &chunkReader{chunks: [][]byte{all[:one+one/2], all[one+one/2:]}}
	r := NewReader(src, 1<<16)
	if r.FrameBuffered() {
		t.Fatal("a frame buffered before any read")
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if r.FrameBuffered() {
		t.Fatal("half a frame counted as buffered")
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if !r.FrameBuffered() {
		t.Fatal("the third frame, read with the second, is not counted as buffered")
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if r.FrameBuffered() {
		t.Fatal("a frame buffered after the last")
	}
}

// TestReadBufferKeepsEveryByte reads a stream arriving in chunks of
// every size, through buffers that grow and shrink, and checks that
// nothing is lost or repeated.
func TestReadBufferKeepsEveryByte(t *testing.T) {
	var want []byte
	var chunks [][]byte
	sizes := []int{100, 70000, 5000, 9000, 1, 65536, 4096, 8191, 60000, 3, 12000, 200000, 7}
	for i, n := range sizes {
		c := make([]byte, n)
		for j := range c {
			c[j] = byte(i*31 + j*7)
		}
		chunks = append(chunks, c)
		want = append(want, c...)
	}
	b := newReadBuffer(&chunkReader{chunks: chunks})
	var got []byte
	p := make([]byte, 1500)
	for i := 0; ; i++ {
		n, err := b.Read(p[:1+i%len(p)])
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d; equal prefix %d", len(got), len(want), commonPrefix(got, want))
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
