package encoding

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Map is an AMQP map kept as an ordered list of key/value pairs. Keys may be
// of any AMQP type (annotations use symbols, application properties use
// strings, some Service Bus maps use ulongs), and keeping the wire order
// lets a decoded map be re-encoded byte for byte.
//
// Lookups are linear, which is faster than hashing for the handful of
// entries real maps carry.
type Map []KeyValue

// KeyValue is one entry of a [Map].
type KeyValue struct {
	Key   any
	Value any
}

// Get returns the value stored under key and whether it was found. Keys
// match only if they have the same AMQP type: Symbol("a") and "a" are
// different keys.
func (m Map) Get(key any) (any, bool) {
	for _, kv := range m {
		if keyEqual(kv.Key, key) {
			return kv.Value, true
		}
	}
	return nil, false
}

// GetSymbol returns the value stored under the symbol key k.
func (m Map) GetSymbol(k Symbol) (any, bool) {
	for _, kv := range m {
		if s, ok := kv.Key.(Symbol); ok && s == k {
			return kv.Value, true
		}
	}
	return nil, false
}

// GetString returns the value stored under the string key k.
func (m Map) GetString(k string) (any, bool) {
	for _, kv := range m {
		if s, ok := kv.Key.(string); ok && s == k {
			return kv.Value, true
		}
	}
	return nil, false
}

// Set replaces the value stored under key, or appends a new entry at the end
// if there is none.
func (m *Map) Set(key, value any) {
	for i := range *m {
		if keyEqual((*m)[i].Key, key) {
			(*m)[i].Value = value
			return
		}
	}
	*m = append(*m, KeyValue{Key: key, Value: value})
}

// Delete removes the entry stored under key, if any, keeping the order of
// the others.
func (m *Map) Delete(key any) {
	*m = slices.DeleteFunc(*m, func(kv KeyValue) bool { return keyEqual(kv.Key, key) })
}

// SymbolMap builds a Map from a Go map with symbol keys, sorted by key so the
// encoding is deterministic.
func SymbolMap(src map[Symbol]any) Map {
	m := make(Map, 0, len(src))
	for k, v := range src {
		m = append(m, KeyValue{Key: k, Value: v})
	}
	slices.SortFunc(m, func(a, b KeyValue) int { return cmp.Compare(a.Key.(Symbol), b.Key.(Symbol)) })
	return m
}

// StringMap builds a Map from a Go map with string keys, sorted by key.
func StringMap(src map[string]any) Map {
	m := make(Map, 0, len(src))
	for k, v := range src {
		m = append(m, KeyValue{Key: k, Value: v})
	}
	slices.SortFunc(m, func(a, b KeyValue) int { return cmp.Compare(a.Key.(string), b.Key.(string)) })
	return m
}

// SymbolKeyed converts m to a Go map. It fails if any key is not a symbol
// or a key repeats.
func (m Map) SymbolKeyed() (map[Symbol]any, error) {
	out := make(map[Symbol]any, len(m))
	for _, kv := range m {
		k, ok := kv.Key.(Symbol)
		if !ok {
			return nil, fmt.Errorf("%w: map key %T is not a symbol", ErrMalformed, kv.Key)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: duplicate map key %q", ErrMalformed, k)
		}
		out[k] = kv.Value
	}
	return out, nil
}

// StringKeyed converts m to a Go map. It fails if any key is not a string
// or a key repeats.
func (m Map) StringKeyed() (map[string]any, error) {
	out := make(map[string]any, len(m))
	for _, kv := range m {
		k, ok := kv.Key.(string)
		if !ok {
			return nil, fmt.Errorf("%w: map key %T is not a string", ErrMalformed, kv.Key)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: duplicate map key %q", ErrMalformed, k)
		}
		out[k] = kv.Value
	}
	return out, nil
}

// CheckKeys reports an error unless every key of m satisfies ok; the frames
// package uses it to enforce symbol-keyed fields and string-keyed
// application properties.
func (m Map) CheckKeys(ok func(key any) bool) error {
	for _, kv := range m {
		if !ok(kv.Key) {
			return fmt.Errorf("%w: unexpected map key type %T", ErrMalformed, kv.Key)
		}
	}
	return nil
}

// IsSymbol reports whether v is a [Symbol]; a ready-made predicate for
// [Map.CheckKeys].
func IsSymbol(v any) bool { _, ok := v.(Symbol); return ok }

// IsString reports whether v is a string; a predicate for [Map.CheckKeys].
func IsString(v any) bool { _, ok := v.(string); return ok }

// keyEqual compares two decoded AMQP values for use as map keys without
// panicking on uncomparable types. Lists, maps, arrays and described
// values never match.
func keyEqual(a, b any) bool {
	switch a := a.(type) {
	case []byte:
		bb, ok := b.([]byte)
		return ok && bytes.Equal(a, bb)
	case time.Time:
		bt, ok := b.(time.Time)
		return ok && a.Equal(bt)
	case nil, bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
		float32, float64, Decimal32, Decimal64, Decimal128, Char, UUID, string, Symbol:
		return a == b
	}
	return false
}

func writeMap(w *buffer.Buffer, m Map, mode compoundMode) error {
	start := beginCompound(w, mode)
	for _, kv := range m {
		if err := Marshal(w, kv.Key); err != nil {
			return err
		}
		if err := Marshal(w, kv.Value); err != nil {
			return err
		}
	}
	endCompound(w, start, 2*len(m), TypeCodeMap8, TypeCodeMap32, mode)
	return nil
}

// ReadMap decodes a map. A null yields a nil Map.
func ReadMap(r *buffer.Buffer) (Map, error) {
	d := newDecoder(r)
	code, err := r.ReadByte()
	if err != nil {
		return nil, errShort
	}
	if code == TypeCodeNull {
		return nil, nil
	}
	return d.readMap(r, code, 0)
}

func (d *decoder) readMap(r *buffer.Buffer, code byte, depth int) (Map, error) {
	if depth >= MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	content, count, err := readCompoundHeader(r, code, TypeCodeMap8, TypeCodeMap32, true)
	if err != nil {
		return nil, err
	}
	if count%2 != 0 {
		return nil, malformed("map has an odd element count %d", count)
	}
	if err := d.charge(sliceCost(count/2, pairSize)); err != nil {
		return nil, err
	}
	sub := buffer.Make(content)
	m := make(Map, count/2)
	for i := range m {
		if m[i].Key, err = d.readAny(&sub, depth+1); err != nil {
			return nil, err
		}
		if m[i].Value, err = d.readAny(&sub, depth+1); err != nil {
			return nil, err
		}
	}
	if sub.Len() != 0 {
		return nil, malformed("map has %d trailing bytes", sub.Len())
	}
	return m, nil
}
