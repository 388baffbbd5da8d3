// Package buffer provides [Buffer], the growable byte buffer with a read
// cursor that the AMQP codec packages encode into and decode from.
//
// A Buffer is used in one of two ways. Encoders append to it (the Append
// methods) and hand [Buffer.Bytes] to the network. Decoders wrap received
// bytes with [New] and consume them with [Buffer.Next], [Buffer.ReadByte] and
// friends; every read method reports short input instead of panicking, so a
// decoder built on it can reject truncated input cleanly.
//
// A Buffer is not safe for concurrent use.
package buffer

import "encoding/binary"

// Buffer is a byte slice with a read cursor. Bytes before the cursor have been
// consumed; bytes from the cursor to the end are unread. The zero value is an
// empty buffer ready to use.
type Buffer struct {
	b []byte // written bytes; b[i:] is unread
	i int    // read cursor, 0 <= i <= len(b)
}

// New returns a Buffer whose unread contents are b. The Buffer takes
// ownership of b: appending may write into b's spare capacity.
func New(b []byte) *Buffer {
	return &Buffer{b: b}
}

// Len returns the number of unread bytes.
func (b *Buffer) Len() int { return len(b.b) - b.i }

// Size returns the total number of bytes written, including bytes already
// read. Encoders use it to remember offsets for [Buffer.Raw] and
// [Buffer.Truncate].
func (b *Buffer) Size() int { return len(b.b) }

// Bytes returns the unread bytes. The slice aliases the buffer and is only
// valid until the next modification.
func (b *Buffer) Bytes() []byte { return b.b[b.i:] }

// Raw returns every written byte, including bytes already read. Encoders use
// it to patch length fields in place at offsets obtained from [Buffer.Size].
func (b *Buffer) Raw() []byte { return b.b }

// Reset empties the buffer, keeping its capacity for reuse.
func (b *Buffer) Reset() {
	b.b = b.b[:0]
	b.i = 0
}

// Reclaim discards the bytes already read by moving the unread bytes to the
// front of the underlying array, so long-lived buffers do not grow forever.
func (b *Buffer) Reclaim() {
	n := copy(b.b, b.b[b.i:])
	b.b = b.b[:n]
	b.i = 0
}

// Truncate discards written bytes after the first n (n counts from the start
// of the buffer, as [Buffer.Size] does). It does nothing if n is out of range
// or would cut into bytes already read.
func (b *Buffer) Truncate(n int) {
	if n < b.i || n > len(b.b) {
		return
	}
	b.b = b.b[:n]
}

// Next consumes and returns the next n unread bytes. It returns false, and
// consumes nothing, if fewer than n bytes remain or n is negative. The slice
// aliases the buffer.
func (b *Buffer) Next(n int64) ([]byte, bool) {
	if n < 0 || n > int64(b.Len()) {
		return nil, false
	}
	p := b.b[b.i : b.i+int(n)]
	b.i += int(n)
	return p, true
}

// Skip consumes n bytes, reporting false (and consuming nothing) if fewer
// than n remain.
func (b *Buffer) Skip(n int) bool {
	_, ok := b.Next(int64(n))
	return ok
}

// Window limits b to the next n unread bytes, as if they were all it
// held, and returns what it held before, for [Buffer.Restore]. It
// reports false, and does nothing, if fewer than n bytes are unread. A
// decoder reads a nested value in the buffer it came in this way instead
// of slicing it into a buffer of its own.
func (b *Buffer) Window(n int) (rest []byte, ok bool) {
	if n < 0 || n > b.Len() {
		return nil, false
	}
	rest = b.b
	b.b = b.b[: b.i+n : b.i+n]
	return rest, true
}

// Restore ends a [Buffer.Window]: b holds rest again, its read cursor
// where reading in the window left it.
func (b *Buffer) Restore(rest []byte) { b.b = rest }

// Unread moves the read cursor back by n bytes. It reports false, and does
// nothing, if fewer than n bytes have been read.
func (b *Buffer) Unread(n int) bool {
	if n < 0 || n > b.i {
		return false
	}
	b.i -= n
	return true
}

// ReadByte consumes one byte, returning [ErrShort] when none remain.
func (b *Buffer) ReadByte() (byte, error) {
	if b.i >= len(b.b) {
		return 0, ErrShort
	}
	c := b.b[b.i]
	b.i++
	return c, nil
}

// PeekByte returns the next unread byte without consuming it, or [ErrShort].
func (b *Buffer) PeekByte() (byte, error) {
	if b.i >= len(b.b) {
		return 0, ErrShort
	}
	return b.b[b.i], nil
}

// ReadUint16 consumes a big-endian uint16.
func (b *Buffer) ReadUint16() (uint16, error) {
	p, ok := b.Next(2)
	if !ok {
		return 0, ErrShort
	}
	return binary.BigEndian.Uint16(p), nil
}

// ReadUint32 consumes a big-endian uint32.
func (b *Buffer) ReadUint32() (uint32, error) {
	p, ok := b.Next(4)
	if !ok {
		return 0, ErrShort
	}
	return binary.BigEndian.Uint32(p), nil
}

// ReadUint64 consumes a big-endian uint64.
func (b *Buffer) ReadUint64() (uint64, error) {
	p, ok := b.Next(8)
	if !ok {
		return 0, ErrShort
	}
	return binary.BigEndian.Uint64(p), nil
}

// Make returns a Buffer value (rather than a pointer) over p, for decoders
// that keep a sub-buffer on the stack.
func Make(p []byte) Buffer {
	return Buffer{b: p}
}
