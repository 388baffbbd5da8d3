package encoding

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// MapSink receives the entries of a map as [ReadMapInto] decodes them,
// so that a caller can build its own structure without the [Map] in
// between: application properties go straight into the broker's message
// (a Map and its boxed string keys were a third of the allocations of a
// send).
type MapSink interface {
	// Len is the number of entries, told before the first.
	Len(n int)
	// StringKey returns the key for a string key's bytes p (which alias
	// the input: a sink keeps them only by copying, or by returning a
	// string it already holds with the same bytes).
	StringKey(p []byte) string
	// Put takes one entry with a string key.
	Put(key string, value any) error
	// PutOther takes one entry whose key is not a string.
	PutOther(key, value any) error
}

// ReadMapInto decodes the map (or null, which has no entries) at the
// start of r into sink, checking and charging it exactly as [ReadMap]
// does: the same values, the same errors for malformed input, the same
// allocation budget, of which a string key counts as ReadMap's boxed
// string whether or not the sink allocates one.
func ReadMapInto(r *buffer.Buffer, sink MapSink) error {
	d := newDecoder(r)
	code, err := r.ReadByte()
	if err != nil {
		return errShort
	}
	if code == TypeCodeNull {
		sink.Len(0)
		return nil
	}
	content, count, err := readCompoundHeader(r, code, TypeCodeMap8, TypeCodeMap32, true)
	if err != nil {
		return err
	}
	if count%2 != 0 {
		return malformed("map has an odd element count %d", count)
	}
	if err := d.charge(sliceCost(count/2, pairSize)); err != nil {
		return err
	}
	sub := buffer.Make(content)
	sink.Len(count / 2)
	for range count / 2 {
		kc, err := sub.PeekByte()
		if err != nil {
			return errShort
		}
		if kc != TypeCodeStr8 && kc != TypeCodeStr32 {
			k, err := d.readAny(&sub, 1)
			if err != nil {
				return err
			}
			v, err := d.readAny(&sub, 1)
			if err != nil {
				return err
			}
			if err := sink.PutOther(k, v); err != nil {
				return err
			}
			continue
		}
		_, _ = sub.ReadByte()
		p, err := readVariable(&sub, kc == TypeCodeStr32)
		if err != nil {
			return err
		}
		if err := d.charge(stringCost(len(p))); err != nil {
			return err
		}
		k := sink.StringKey(p)
		v, err := d.readAny(&sub, 1)
		if err != nil {
			return err
		}
		if err := sink.Put(k, v); err != nil {
			return err
		}
	}
	if sub.Len() != 0 {
		return malformed("map has %d trailing bytes", sub.Len())
	}
	return nil
}

// WriteStringKeyedMap appends a map whose keys are strings, in the order
// of keys, the value of key k being value(k): what [Marshal] writes for
// the equivalent [Map], without building one (and boxing every key) for
// each message the broker delivers.
func WriteStringKeyedMap(w *buffer.Buffer, keys []string, value func(k string) any) error {
	start := beginCompound(w, smallest)
	for _, k := range keys {
		WriteString(w, k)
		if err := Marshal(w, value(k)); err != nil {
			return err
		}
	}
	endCompound(w, start, 2*len(keys), TypeCodeMap8, TypeCodeMap32, smallest)
	return nil
}

// WriteMap appends m as [Marshal] does, without putting it in an
// interface first (which allocates a copy of its slice header: two
// allocations of every message delivered, for its two annotation maps).
func WriteMap(w *buffer.Buffer, m Map) error { return writeMap(w, m, smallest) }

// WriteMapWith appends a map whose entries write appends, key and value
// after key and value, returning how many entries it wrote: the map's
// header is filled in afterwards, as Marshal sizes a Map's. A caller
// that knows its keys' and values' types writes them with WriteSymbol,
// WriteLong and the like, boxing none of them.
func WriteMapWith(w *buffer.Buffer, write func() (entries int, err error)) error {
	start := beginCompound(w, smallest)
	n, err := write()
	if err != nil {
		return err
	}
	endCompound(w, start, 2*n, TypeCodeMap8, TypeCodeMap32, smallest)
	return nil
}
