package encoding

import "github.com/omnibusmq/omnibus/amqpserver/internal/buffer"

// Skip advances r past one encoded value without decoding it. Sizes and
// counts are checked against the input, but the contents of lists, maps and
// arrays are not inspected.
func Skip(r *buffer.Buffer) error {
	return skip(r, 0)
}

func skip(r *buffer.Buffer, depth int) error {
	if depth >= MaxDepth {
		return malformed("nesting deeper than %d", MaxDepth)
	}
	code, err := readCode(r)
	if err != nil {
		return err
	}
	switch code {
	case TypeCodeDescribed:
		if err := skip(r, depth+1); err != nil {
			return err
		}
		return skip(r, depth+1)
	case TypeCodeVbin8, TypeCodeStr8, TypeCodeSym8:
		_, err := readVariable(r, false)
		return err
	case TypeCodeVbin32, TypeCodeStr32, TypeCodeSym32:
		_, err := readVariable(r, true)
		return err
	case TypeCodeList8, TypeCodeList32:
		_, _, err := readCompoundHeader(r, code, TypeCodeList8, TypeCodeList32, true)
		return err
	case TypeCodeMap8, TypeCodeMap32:
		_, _, err := readCompoundHeader(r, code, TypeCodeMap8, TypeCodeMap32, true)
		return err
	case TypeCodeArray8, TypeCodeArray32:
		_, _, err := readCompoundHeader(r, code, TypeCodeArray8, TypeCodeArray32, false)
		return err
	}
	n := fixedWidth(code)
	if n < 0 {
		return malformed("unknown constructor 0x%02x", code)
	}
	if !r.Skip(n) {
		return errShort
	}
	return nil
}

// ReadRaw returns a copy of the encoding of the next value in r, constructor
// included, and advances r past it. Writing the result back with [Marshal]
// reproduces the input byte for byte. The broker uses it to store message
// body sections verbatim.
func ReadRaw(r *buffer.Buffer) (Raw, error) {
	p, err := SkipRaw(r)
	if err != nil {
		return nil, err
	}
	return append(Raw{}, p...), nil
}

// SkipRaw is like [ReadRaw] but returns a slice that aliases r, for callers
// that consume the bytes before r changes.
func SkipRaw(r *buffer.Buffer) ([]byte, error) {
	rest := r.Bytes()
	before := r.Len()
	if err := Skip(r); err != nil {
		return nil, err
	}
	return rest[:before-r.Len()], nil
}
