package frames

import (
	"fmt"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// fieldWriter writes the fields of a composite type in order. Each method
// writes one field, as null when the value is absent; end keeps them all
// (see [encoding.ListWriter]).
type fieldWriter struct {
	w *buffer.Buffer
	l encoding.ListWriter
}

func beginComposite(w *buffer.Buffer, code uint64) fieldWriter {
	encoding.WriteDescriptor(w, code)
	return fieldWriter{w: w, l: encoding.BeginList(w)}
}

func (f *fieldWriter) end() { f.l.End() }

func (f *fieldWriter) null() { f.l.Null() }

func (f *fieldWriter) uint(v uint32) {
	encoding.WriteUint(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) optUint(v *uint32) {
	if v == nil {
		f.l.Null()
		return
	}
	f.uint(*v)
}

// uintDefault writes v unless it equals the spec default def.
func (f *fieldWriter) uintDefault(v, def uint32) {
	if v == def {
		f.l.Null()
		return
	}
	f.uint(v)
}

func (f *fieldWriter) ulong(v uint64) {
	encoding.WriteUlong(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) ubyte(v uint8) {
	encoding.WriteUbyte(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) optUbyte(v *uint8) {
	if v == nil {
		f.l.Null()
		return
	}
	f.ubyte(*v)
}

func (f *fieldWriter) ushort(v uint16) {
	encoding.WriteUshort(f.w, v)
	f.l.Field()
}

// bool writes v as a mandatory boolean (always present).
func (f *fieldWriter) bool(v bool) {
	encoding.WriteBool(f.w, v)
	f.l.Field()
}

// flag writes a boolean whose default is false, as null when false.
func (f *fieldWriter) flag(v bool) {
	if !v {
		f.l.Null()
		return
	}
	f.bool(true)
}

func (f *fieldWriter) string(v string) {
	if v == "" {
		f.l.Null()
		return
	}
	encoding.WriteString(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) symbol(v encoding.Symbol) {
	if v == "" {
		f.l.Null()
		return
	}
	encoding.WriteSymbol(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) symbols(v []encoding.Symbol) {
	if v == nil {
		f.l.Null()
		return
	}
	encoding.WriteSymbolArray(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) binary(v []byte) {
	if v == nil {
		f.l.Null()
		return
	}
	encoding.WriteBinary(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) timestamp(v time.Time) {
	if v.IsZero() {
		f.l.Null()
		return
	}
	encoding.WriteTimestamp(f.w, v)
	f.l.Field()
}

func (f *fieldWriter) mapField(m encoding.Map) error {
	if m == nil {
		f.l.Null()
		return nil
	}
	return f.l.Value(m)
}

// marshaler writes a nested composite (source, error, delivery state). The
// caller passes nil for an absent field; typed nil pointers must be
// converted to a nil interface first (see the callers).
func (f *fieldWriter) marshaler(m encoding.Marshaler) error {
	if m == nil {
		f.l.Null()
		return nil
	}
	if err := m.MarshalAMQP(f.w); err != nil {
		return err
	}
	f.l.Field()
	return nil
}

// value writes an arbitrary AMQP value (message-id, correlation-id,
// address), null when v is nil.
func (f *fieldWriter) value(v any) error { return f.l.Value(v) }

// decodeFields reads the described list of a composite type whose
// descriptor has already been consumed. It calls field for every non-null
// field, with r positioned at the field's value; field must consume exactly
// that value (returning skip(r) for fields it ignores). Fields whose bit is
// set in mandatory must be present, or decoding fails.
func decodeFields(r *buffer.Buffer, name string, mandatory uint32, field func(i int, r *buffer.Buffer) error) error {
	// The list is read in r itself (a ListWindow), not in a buffer of
	// its own: field's r escapes, and a list of every frame's
	// performative would otherwise be an allocation of every frame.
	l, err := encoding.OpenList(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	seen, err := readFields(&l, name, field)
	if cerr := l.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: %w", name, cerr)
	}
	if err != nil {
		return err
	}
	if missing := mandatory &^ seen; missing != 0 {
		for i := range 32 {
			if missing&(1<<i) != 0 {
				return fmt.Errorf("%w: %s: mandatory field %d is missing", ErrMalformed, name, i)
			}
		}
	}
	return nil
}

// readFields calls field for each non-null element of l.
func readFields(l *encoding.ListWindow, name string, field func(i int, r *buffer.Buffer) error) (seen uint32, err error) {
	for {
		i, err := l.Next()
		if err != nil {
			return seen, fmt.Errorf("%s: %w", name, err)
		}
		if i < 0 {
			return seen, nil
		}
		if i < 32 {
			seen |= 1 << i
		}
		if err := field(i, l.Buf()); err != nil {
			return seen, fmt.Errorf("%s field %d: %w", name, i, err)
		}
	}
}

// skip consumes a field that the decoder does not interpret (fields added
// by a later protocol version, or beyond the known list).
func skip(r *buffer.Buffer) error { return encoding.Skip(r) }

// readOptUint decodes a uint into a freshly allocated pointer.
func readOptUint(r *buffer.Buffer) (*uint32, error) {
	v, err := encoding.ReadUint(r)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// readUintInto decodes a uint into *dst and returns dst.
func readUintInto(r *buffer.Buffer, dst *uint32) (*uint32, error) {
	v, err := encoding.ReadUint(r)
	if err != nil {
		return nil, err
	}
	*dst = v
	return dst, nil
}

func readOptUbyte(r *buffer.Buffer) (*uint8, error) {
	v, err := encoding.ReadUbyte(r)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// expectDescriptor reads a descriptor and checks that it is want.
func expectDescriptor(r *buffer.Buffer, want uint64, name string) error {
	code, err := encoding.ReadDescriptor(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if code != want {
		return fmt.Errorf("%w: descriptor 0x%x where %s (0x%x) expected", ErrMalformed, code, name, want)
	}
	return nil
}

// binaryAlways writes a mandatory binary, empty when v is nil.
func (f *fieldWriter) binaryAlways(v []byte) {
	encoding.WriteBinary(f.w, v)
	f.l.Field()
}

// symbolAlways writes a mandatory symbol, even when empty.
func (f *fieldWriter) symbolAlways(v encoding.Symbol) {
	encoding.WriteSymbol(f.w, v)
	f.l.Field()
}

// stringAlways writes a mandatory string, even when empty.
func (f *fieldWriter) stringAlways(v string) {
	encoding.WriteString(f.w, v)
	f.l.Field()
}

// symbolsAlways writes a mandatory symbol array, empty when v is nil.
func (f *fieldWriter) symbolsAlways(v []encoding.Symbol) {
	encoding.WriteSymbolArray(f.w, v)
	f.l.Field()
}
