package encoding

import (
	"encoding/binary"
	"math"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// compoundHeader is the size of a compound's 32-bit header: a
// constructor, a 4-byte size and a 4-byte count. smallHeader is the
// 8-bit form's: a constructor, a size byte and a count byte.
const (
	compoundHeader = 9
	smallHeader    = 3
)

// compoundMode says how endCompound writes a list, map or array header.
type compoundMode int

const (
	// smallest writes the constructor and picks the 8- or 32-bit form.
	smallest compoundMode = iota
	// elementWide writes no constructor and always the 32-bit form: the
	// layout of a compound value inside an array, whose constructor is
	// shared by all elements.
	elementWide
)

// beginCompound reserves room for a compound header (list, map or array) in
// the given mode and returns its offset for endCompound: in smallest mode
// the 8-bit form's, which most compounds the broker writes take (a
// performative, a message's header, properties and annotations).
func beginCompound(w *buffer.Buffer, mode compoundMode) int {
	start := w.Size()
	if mode == smallest {
		w.AppendByte(0)
		w.AppendUint16(0)
		return start
	}
	w.AppendUint32(0)
	w.AppendUint32(0)
	return start
}

// endCompound fills in the header reserved at start for count elements. In
// smallest mode it writes the 8-bit form when size and count fit in a
// byte, and otherwise widens the header to the 32-bit form, moving the
// content written since beginCompound. (It used to reserve the 32-bit
// form and move the content of every small compound back instead.)
func endCompound(w *buffer.Buffer, start, count int, code8, code32 byte, mode compoundMode) {
	raw := w.Raw()
	if mode == elementWide {
		binary.BigEndian.PutUint32(raw[start:], uint32(len(raw)-start-4))
		binary.BigEndian.PutUint32(raw[start+4:], uint32(count))
		return
	}
	content := len(raw) - start - smallHeader
	if content+1 <= math.MaxUint8 && count <= math.MaxUint8 {
		raw[start] = code8
		raw[start+1] = byte(content + 1)
		raw[start+2] = byte(count)
		return
	}
	w.Append(make([]byte, compoundHeader-smallHeader))
	raw = w.Raw()
	copy(raw[start+compoundHeader:], raw[start+smallHeader:len(raw)-(compoundHeader-smallHeader)])
	raw[start] = code32
	binary.BigEndian.PutUint32(raw[start+1:], uint32(content+4))
	binary.BigEndian.PutUint32(raw[start+5:], uint32(count))
}

// writeList encodes a generic list. Unlike a [ListWriter], it keeps
// trailing nulls: in a plain list they are values.
func writeList(w *buffer.Buffer, l []any, mode compoundMode) error {
	if len(l) == 0 && mode == smallest {
		w.AppendByte(TypeCodeList0)
		return nil
	}
	start := beginCompound(w, mode)
	for _, v := range l {
		if err := Marshal(w, v); err != nil {
			return err
		}
	}
	endCompound(w, start, len(l), TypeCodeList8, TypeCodeList32, mode)
	return nil
}

// ListWriter encodes the list of a composite type (a performative, a
// delivery state, a message section) field by field, without boxing field
// values. Every field is written, absent ones as null: the spec lets a
// sender omit trailing nulls, but Service Bus never does (its AMQP
// library, Microsoft.Azure.Amqp, encodes a composite's whole field
// count), and clients read fields by position: the Python SDK's pyamqp
// before azure-servicebus 7.15 fails on an open, attach, transfer or
// message properties section shorter than its definition. The smallest
// list encoding is chosen when the list ends.
//
// Usage:
//
//	encoding.WriteDescriptor(w, 0x14)
//	l := encoding.BeginList(w)
//	encoding.WriteUint(w, handle)
//	l.Field() // field 0 written
//	l.Null()  // field 1 absent
//	l.End()
type ListWriter struct {
	w     *buffer.Buffer
	start int // offset of the list constructor
	count int // fields written, including nulls
}

// BeginList starts a composite list in w.
func BeginList(w *buffer.Buffer) ListWriter {
	start := beginCompound(w, smallest)
	return ListWriter{w: w, start: start}
}

// Field records that one non-null field has just been written to the
// buffer.
func (l *ListWriter) Field() { l.count++ }

// Null writes a null field.
func (l *ListWriter) Null() {
	l.w.AppendByte(TypeCodeNull)
	l.count++
}

// Value writes v with [Marshal] as the next field (null if v is nil).
func (l *ListWriter) Value(v any) error {
	if v == nil {
		l.Null()
		return nil
	}
	if err := Marshal(l.w, v); err != nil {
		return err
	}
	l.Field()
	return nil
}

// End writes the list header (list0 for a composite without fields,
// else list8 or list32).
func (l *ListWriter) End() {
	if l.count == 0 {
		l.w.Truncate(l.start)
		l.w.AppendByte(TypeCodeList0)
		return
	}
	endCompound(l.w, l.start, l.count, TypeCodeList8, TypeCodeList32, smallest)
}

// ListReader walks the fields of an encoded list, typically the list of a
// composite type. It skips null fields, so a decoder only sees the fields
// that are present:
//
//	l, err := encoding.NewListReader(r)
//	for {
//		i, err := l.Next()
//		if err != nil { return err }
//		if i < 0 { break }
//		switch i {
//		case 0:
//			x.Handle, err = encoding.ReadUint(l.Buf())
//		default:
//			err = encoding.Skip(l.Buf())
//		}
//		if err != nil { return err }
//	}
//	return l.End()
type ListReader struct {
	buf   buffer.Buffer // the list content, after size and count
	count int           // number of elements in the list
	next  int           // index of the next element to read
}

// NewListReader reads a list header (list0, list8 or list32) from r and
// returns a reader over its elements. r is advanced past the whole list.
func NewListReader(r *buffer.Buffer) (ListReader, error) {
	code, err := r.ReadByte()
	if err != nil {
		return ListReader{}, errShort
	}
	return newListReader(r, code)
}

func newListReader(r *buffer.Buffer, code byte) (ListReader, error) {
	size, count, err := readListHeader(r, code)
	if err != nil {
		return ListReader{}, err
	}
	content, _ := r.Next(int64(size)) // readListHeader checked the length
	return ListReader{buf: buffer.Make(content), count: count}, nil
}

// readListHeader reads the rest of a list header whose constructor code
// was read, and returns the size of its content, which is there to read
// in r, and its element count.
func readListHeader(r *buffer.Buffer, code byte) (size, count int, err error) {
	switch code {
	case TypeCodeList0:
		return 0, 0, nil
	case TypeCodeList8:
		p, ok := r.Next(2)
		if !ok {
			return 0, 0, errShort
		}
		size, count = int(p[0]), int(p[1])
		size--
	case TypeCodeList32:
		p, ok := r.Next(8)
		if !ok {
			return 0, 0, errShort
		}
		size64 := int64(binary.BigEndian.Uint32(p)) - 4
		if size64 > int64(r.Len()) {
			return 0, 0, malformed("list size %d exceeds input", size64)
		}
		size, count = int(size64), int(binary.BigEndian.Uint32(p[4:]))
	default:
		return 0, 0, malformed("constructor 0x%02x is not a list", code)
	}
	if size < 0 {
		return 0, 0, malformed("list size too small")
	}
	if size > r.Len() {
		return 0, 0, malformed("list size %d exceeds input", size)
	}
	if count > size {
		// Every element takes at least one byte.
		return 0, 0, malformed("list count %d exceeds its size %d", count, size)
	}
	return size, count, nil
}

// ListWindow is a [ListReader] that reads the list in the buffer it came
// from rather than in a buffer of its own: while it is open that buffer
// holds only the list's content, and [ListWindow.Close] gives the rest
// back. A decoder that hands the element's buffer to a function value
// (which makes the buffer escape to the heap) then allocates nothing for
// the list: its buffer is already there.
type ListWindow struct {
	r     *buffer.Buffer
	rest  []byte // what r held before the list was opened
	count int    // number of elements in the list
	next  int    // index of the next element to read
}

// OpenList reads a list header (list0, list8 or list32) from r, with the
// checks of [NewListReader], and limits r to the list's content until
// [ListWindow.Close]. On error r is as the failed read left it, not
// limited.
func OpenList(r *buffer.Buffer) (ListWindow, error) {
	code, err := r.ReadByte()
	if err != nil {
		return ListWindow{}, errShort
	}
	size, count, err := readListHeader(r, code)
	if err != nil {
		return ListWindow{}, err
	}
	rest, _ := r.Window(size) // readListHeader checked the length
	return ListWindow{r: r, rest: rest, count: count}, nil
}

// Buf returns the buffer positioned at the current element, as
// [ListReader.Buf] does: the buffer OpenList was given.
func (l *ListWindow) Buf() *buffer.Buffer { return l.r }

// Next is [ListReader.Next]: the index of the next non-null element, at
// which the window's buffer is positioned, or -1 when none remain.
func (l *ListWindow) Next() (int, error) {
	for l.next < l.count {
		i := l.next
		l.next++
		c, err := l.r.PeekByte()
		if err != nil {
			return -1, malformed("list ends after %d of %d elements", i, l.count)
		}
		if c != TypeCodeNull {
			return i, nil
		}
		l.r.Skip(1)
	}
	return -1, nil
}

// Close gives the buffer back whole, positioned where reading the list
// left it (after the list, once every element was read), and reports the
// error [ListReader.End] would. Call it whatever happened since
// [OpenList].
func (l *ListWindow) Close() error {
	if l.r == nil {
		return nil // list0 of an OpenList that failed: nothing limited
	}
	unread := l.r.Len()
	l.r.Restore(l.rest)
	l.r = nil
	if l.next < l.count {
		return malformed("list has %d unread elements", l.count-l.next)
	}
	if unread != 0 {
		return malformed("list has %d trailing bytes", unread)
	}
	return nil
}

// Len returns the number of elements in the list, nulls included.
func (l *ListReader) Len() int { return l.count }

// Buf returns the buffer positioned at the current element. Read exactly
// one value from it after each call to [ListReader.Next].
func (l *ListReader) Buf() *buffer.Buffer { return &l.buf }

// Next skips null elements and returns the index of the next non-null
// element, or -1 when no elements remain.
func (l *ListReader) Next() (int, error) {
	for l.next < l.count {
		i := l.next
		l.next++
		c, err := l.buf.PeekByte()
		if err != nil {
			return -1, malformed("list ends after %d of %d elements", i, l.count)
		}
		if c != TypeCodeNull {
			return i, nil
		}
		l.buf.Skip(1)
	}
	return -1, nil
}

// End reports an error if the list's content was not consumed exactly.
func (l *ListReader) End() error {
	if l.next < l.count {
		return malformed("list has %d unread elements", l.count-l.next)
	}
	if l.buf.Len() != 0 {
		return malformed("list has %d trailing bytes", l.buf.Len())
	}
	return nil
}
