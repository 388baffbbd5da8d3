package encoding

import "github.com/omnibusmq/omnibus/amqpserver/internal/buffer"

// MapReader reads the entries of an encoded map one by one as their
// encodings, decoding and allocating nothing: a broker that keeps a map as
// it arrived (a message's application properties) checks its entries
// with it and stores the bytes.
//
// It checks what [Skip] checks of each key and value (constructors, sizes
// and counts against the input; the contents of a list, map or array
// not at all) and, at the end, that the map's size holds nothing more
// than its entries. A caller that accepts only values whose every byte
// that check covers (scalars, strings, binaries) has thereby checked the
// map as thoroughly as [ReadMap] would.
type MapReader struct {
	sub  buffer.Buffer // the entries not read yet
	left int           // how many
	err  error
}

// NewMapReader starts reading the map, or null (a map with no entries),
// that p holds. It fails if p is not exactly one map or null: another
// constructor, a size or count the input does not hold, an odd count, or
// bytes after the map.
func NewMapReader(p []byte) (MapReader, error) {
	r := buffer.New(p)
	code, err := readCode(r)
	if err != nil {
		return MapReader{}, err
	}
	if code == TypeCodeNull {
		if r.Len() != 0 {
			return MapReader{}, malformed("%d bytes after the map", r.Len())
		}
		return MapReader{}, nil
	}
	content, count, err := readCompoundHeader(r, code, TypeCodeMap8, TypeCodeMap32, true)
	if err != nil {
		return MapReader{}, err
	}
	if count%2 != 0 {
		return MapReader{}, malformed("map has an odd element count %d", count)
	}
	if r.Len() != 0 {
		return MapReader{}, malformed("%d bytes after the map", r.Len())
	}
	if count == 0 && len(content) != 0 {
		return MapReader{}, malformed("map has %d trailing bytes", len(content))
	}
	return MapReader{sub: buffer.Make(content), left: count / 2}, nil
}

// Len is how many entries are left to read.
func (m *MapReader) Len() int { return m.left }

// Next returns the encodings of the next entry's key and value, each
// with its constructor, aliasing the input. It returns an error on
// malformed input, and when no entries are left.
func (m *MapReader) Next() (key, value []byte, err error) {
	if m.left <= 0 {
		return nil, nil, malformed("no map entries left")
	}
	if key, err = SkipRaw(&m.sub); err != nil {
		m.left = 0
		return nil, nil, err
	}
	if value, err = SkipRaw(&m.sub); err != nil {
		m.left = 0
		return nil, nil, err
	}
	m.left--
	if m.left == 0 && m.sub.Len() != 0 {
		return nil, nil, malformed("map has %d trailing bytes", m.sub.Len())
	}
	return key, value, nil
}

// VariableData returns the data of an encoded binary, string or symbol
// (without its constructor and length), and false for any other
// constructor or a length that is not the rest of p.
func VariableData(p []byte) ([]byte, bool) {
	if len(p) < 2 {
		return nil, false
	}
	var n, hdr int
	switch p[0] {
	case TypeCodeVbin8, TypeCodeStr8, TypeCodeSym8:
		n, hdr = int(p[1]), 2
	case TypeCodeVbin32, TypeCodeStr32, TypeCodeSym32:
		if len(p) < 5 {
			return nil, false
		}
		n, hdr = int(uint32(p[1])<<24|uint32(p[2])<<16|uint32(p[3])<<8|uint32(p[4])), 5
	default:
		return nil, false
	}
	if len(p)-hdr != n {
		return nil, false
	}
	return p[hdr:], true
}

// FixedData returns the data bytes of an encoded fixed-width value
// (without its constructor), and false for any other constructor or a
// width that is not the rest of p.
func FixedData(p []byte) ([]byte, bool) {
	if len(p) == 0 {
		return nil, false
	}
	n := fixedWidth(p[0])
	if n < 0 || len(p)-1 != n {
		return nil, false
	}
	return p[1:], true
}
