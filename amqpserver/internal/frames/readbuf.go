package frames

import "io"

// Sizes of a Reader's input buffer. It starts at minReadBuffer and
// doubles, up to maxReadBuffer, after each read that filled it: a busy
// connection then takes everything the peer wrote since the last read
// (up to maxReadBuffer) in one system call, and the frames of that read
// can be handled together. It falls back to minReadBuffer after a read
// that brought less than an eighth of it (and no more than
// minReadBuffer), so an idle or quiet connection holds no more than
// minReadBuffer.
const (
	minReadBuffer = 4 << 10
	maxReadBuffer = 64 << 10
)

// readBuffer is a buffered reader whose buffer grows with a busy stream
// and shrinks with a quiet one (see minReadBuffer). Reads of at least the
// buffer's size into an empty buffer bypass it.
type readBuffer struct {
	src  io.Reader
	buf  []byte
	r, w int   // buf[r:w] is buffered
	err  error // the source's error, returned once buf is empty
}

func newReadBuffer(src io.Reader) *readBuffer {
	return &readBuffer{src: src, buf: make([]byte, minReadBuffer)}
}

// Buffered returns how many bytes can be read without reading the source.
func (b *readBuffer) Buffered() int { return b.w - b.r }

// peek returns the buffered bytes, without consuming them.
func (b *readBuffer) peek() []byte { return b.buf[b.r:b.w] }

// Read reads into p from the buffer, filling it from the source (one read)
// when it is empty.
func (b *readBuffer) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if b.err != nil {
			err := b.err
			b.err = nil
			return 0, err
		}
		if len(p) >= len(b.buf) {
			return b.src.Read(p)
		}
		b.fill()
		if b.r == b.w {
			err := b.err
			b.err = nil
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// fill reads once from the source into the empty buffer, resizing it
// first as the previous fill suggested.
func (b *readBuffer) fill() {
	b.r, b.w = 0, 0
	n, err := b.src.Read(b.buf)
	if n < 0 || n > len(b.buf) {
		n, err = 0, io.ErrNoProgress
	}
	b.w, b.err = n, err
	switch {
	case n == len(b.buf) && len(b.buf) < maxReadBuffer:
		grown := make([]byte, 2*len(b.buf))
		b.w = copy(grown, b.buf[:n])
		b.buf = grown
	case n < len(b.buf)/8 && n <= minReadBuffer && len(b.buf) > minReadBuffer:
		small := make([]byte, minReadBuffer)
		b.w = copy(small, b.buf[:n])
		b.buf = small
	}
}
