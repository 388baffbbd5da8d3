package buffer

import "encoding/binary"

// Append appends p.
func (b *Buffer) Append(p []byte) { b.b = append(b.b, p...) }

// AppendByte appends one byte.
func (b *Buffer) AppendByte(c byte) { b.b = append(b.b, c) }

// AppendString appends the bytes of s.
func (b *Buffer) AppendString(s string) { b.b = append(b.b, s...) }

// AppendUint16 appends n in big-endian order.
func (b *Buffer) AppendUint16(n uint16) { b.b = binary.BigEndian.AppendUint16(b.b, n) }

// AppendUint32 appends n in big-endian order.
func (b *Buffer) AppendUint32(n uint32) { b.b = binary.BigEndian.AppendUint32(b.b, n) }

// AppendUint64 appends n in big-endian order.
func (b *Buffer) AppendUint64(n uint64) { b.b = binary.BigEndian.AppendUint64(b.b, n) }

// Grow makes room for at least n more bytes without another allocation.
func (b *Buffer) Grow(n int) {
	if cap(b.b)-len(b.b) < n {
		nb := make([]byte, len(b.b), 2*cap(b.b)+n)
		copy(nb, b.b)
		b.b = nb
	}
}
