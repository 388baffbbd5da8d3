package frames

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Reader reads protocol headers and whole frames from a byte stream,
// enforcing a maximum frame size before allocating a frame's body.
//
// A Reader buffers its input, so once created it must be the only reader of
// the underlying stream. Its read methods are not safe for concurrent use (a
// connection's reader goroutine owns them), but [Reader.SetMaxFrameSize] and
// [Reader.MaxFrameSize] may be called from any goroutine.
type Reader struct {
	r   *readBuffer
	max atomic.Uint32 // largest acceptable frame size, header included
	hdr [HeaderSize]byte
	// body is the read cursor over the frame being decoded, reused from
	// frame to frame: decoding keeps slices of the frame's bytes (a
	// transfer's payload), never the cursor, so a frame allocates its
	// bytes and its performative, not the cursor too.
	body buffer.Buffer
}

// NewReader returns a Reader over r that rejects frames larger than
// maxFrameSize bytes. A maxFrameSize below [MinMaxFrameSize] is raised to
// it: every peer may send frames up to that size before open is exchanged.
func NewReader(r io.Reader, maxFrameSize uint32) *Reader {
	rd := &Reader{r: newReadBuffer(r)}
	rd.SetMaxFrameSize(maxFrameSize)
	return rd
}

// SetMaxFrameSize changes the maximum frame size, for example to the value
// the server advertised in its open, or to a small size until a connection
// is authorized and back up once it is. Values below [MinMaxFrameSize] are
// raised to it. It is safe to call while another goroutine is inside
// [Reader.ReadFrame]: the new limit applies from the next frame header the
// Reader parses (a frame whose header was already checked is read whole).
func (r *Reader) SetMaxFrameSize(n uint32) {
	r.max.Store(max(n, MinMaxFrameSize))
}

// MaxFrameSize returns the current maximum frame size.
func (r *Reader) MaxFrameSize() uint32 { return r.max.Load() }

// ReadProtocolHeader reads an 8-byte protocol header. See
// [ParseProtocolHeader] for how to handle a mismatching one.
func (r *Reader) ReadProtocolHeader() (ProtocolHeader, error) {
	var p [ProtocolHeaderSize]byte
	if _, err := io.ReadFull(r.r, p[:]); err != nil {
		return ProtocolHeader{}, err
	}
	return ParseProtocolHeader(p[:])
}

// ReadFrame reads and decodes the next frame. An empty frame (heartbeat)
// is returned with a nil Body.
//
// Errors: [ErrFrameTooLarge] when the header announces more than the
// maximum frame size (the body is not read, so the stream is no longer
// usable), [ErrFrameTooSmall] for a size or data offset smaller than the
// header, an error wrapping [ErrMalformed] for an undecodable body, and the
// underlying reader's error otherwise (io.EOF at a frame boundary,
// io.ErrUnexpectedEOF inside a frame).
func (r *Reader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	h, err := parseHeaderBytes(r.hdr[:])
	if err != nil {
		return Frame{}, err
	}
	if limit := r.max.Load(); h.Size > limit {
		return Frame{}, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, h.Size, limit)
	}
	body, err := r.readBody(int(h.Size - HeaderSize))
	if err != nil {
		return Frame{}, err
	}
	r.body = buffer.Make(body)
	br := &r.body
	br.Skip(int(h.DataOffset)*4 - HeaderSize) // extended header, bounds checked by parseHeaderBytes
	f, err := parseFrameBody(h, br)
	r.body = buffer.Buffer{} // let go of the frame's bytes
	return f, err
}

// FrameBuffered reports whether a whole frame is already buffered, so
// that the next [Reader.ReadFrame] returns without reading from the
// stream (and so without blocking). A header that [Reader.ReadFrame]
// would refuse counts as buffered: reading it fails at once.
func (r *Reader) FrameBuffered() bool {
	n := r.r.Buffered()
	if n < HeaderSize {
		return false
	}
	size := binary.BigEndian.Uint32(r.r.peek())
	return size < HeaderSize || size > r.max.Load() || int64(size) <= int64(n)
}

// eagerBody is the largest frame body the Reader allocates in full as soon
// as the frame's header arrives. A larger body grows as its bytes arrive
// (doubling), so a peer that announces a large frame and then sends
// nothing makes the connection hold at most this much for it.
const eagerBody = 64 << 10

// readBody reads the n bytes of a frame body into a fresh slice: decoded
// transfers alias it (Payload), so it must not be reused for the next
// frame.
func (r *Reader) readBody(n int) ([]byte, error) {
	body := make([]byte, min(n, eagerBody))
	if _, err := io.ReadFull(r.r, body); err != nil {
		return nil, unexpectedEOF(err)
	}
	for len(body) < n {
		grown := make([]byte, min(n, 2*len(body)))
		m := copy(grown, body)
		if _, err := io.ReadFull(r.r, grown[m:]); err != nil {
			return nil, unexpectedEOF(err)
		}
		body = grown
	}
	return body, nil
}

// unexpectedEOF maps io.EOF inside a frame to io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
