// Package encoding implements the AMQP 1.0 type system (OASIS AMQP 1.0
// part 1, §1.6): the wire encoding of every primitive type, lists, maps,
// arrays and described types.
//
// # Go representation
//
// Decoding with [Unmarshal] yields these Go values, and [Marshal] accepts
// them (plus a few conveniences listed on [Marshal]):
//
//	AMQP type            Go type
//	null                 nil
//	boolean              bool
//	ubyte/ushort         uint8 / uint16
//	uint/ulong           uint32 / uint64
//	byte/short           int8 / int16
//	int/long             int32 / int64
//	float/double         float32 / float64
//	decimal32/64/128     [Decimal32] / [Decimal64] / [Decimal128] (raw bytes)
//	char                 [Char]
//	timestamp            time.Time (UTC, millisecond precision)
//	uuid                 [UUID]
//	binary               []byte
//	string               string
//	symbol               [Symbol]
//	list                 []any
//	map                  [Map] (ordered key/value pairs; keys may be any type)
//	array                [Array] (never confused with a list)
//	described            [Described] (descriptor + value)
//
// The encoder always chooses the smallest encoding for a value (uint0 and
// smalluint for small uints, str8 for short strings, list0 for empty lists
// and so on), so a value that is decoded and re-encoded may come out shorter
// than it went in but never changes type. To keep bytes verbatim, capture
// them with [ReadRaw] and write them back as a [Raw] value.
//
// # Composite types
//
// Performatives and message sections are described lists. [ListWriter] and
// [ListReader] let the frames package encode and decode them field by field
// without boxing values into interfaces; the typed Write and Read functions
// (for example [WriteUint] and [ReadUint]) handle the individual fields.
//
// # Safety
//
// Decoding never panics. Any length or count in the input that claims more
// bytes than remain is rejected before memory is allocated for it, nesting
// is limited to [MaxDepth] levels, and every failure wraps [ErrMalformed].
// Each top-level decode carries an allocation budget of [AllocFactor]
// bytes per byte of the value's encoding, charged before every slice and
// boxed value is allocated; a value that needs more (arrays of elements
// that take no bytes, such as nulls, are the way to try) fails with
// [ErrBudget]. [Validate] checks a value as thoroughly as [Unmarshal]
// without allocating at all.
package encoding
