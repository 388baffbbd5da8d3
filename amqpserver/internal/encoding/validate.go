package encoding

import "github.com/omnibusmq/omnibus/amqpserver/internal/buffer"

// Validate advances r past one encoded value, checking it as [Unmarshal]
// does (every constructor, size, count and trailing byte, nesting up to
// [MaxDepth]) but building nothing: it allocates no memory, whatever the
// input, and takes time linear in the value's size. A broker that stores a
// message body and never reads it validates the body instead of decoding
// it. The one input Validate accepts and Unmarshal refuses is a value that
// Unmarshal would need more than its budget for ([ErrBudget]).
func Validate(r *buffer.Buffer) error {
	return validate(r, 0)
}

func validate(r *buffer.Buffer, depth int) error {
	code, err := readCode(r)
	if err != nil {
		return err
	}
	return validateValue(r, code, depth)
}

// validateValue checks the value whose constructor has been read. It
// mirrors decoder.readValue case by case.
func validateValue(r *buffer.Buffer, code byte, depth int) error {
	switch code {
	case TypeCodeDescribed:
		if depth >= MaxDepth {
			return malformed("nesting deeper than %d", MaxDepth)
		}
		if err := validate(r, depth+1); err != nil {
			return err
		}
		return validate(r, depth+1)
	case TypeCodeList8, TypeCodeList32, TypeCodeMap8, TypeCodeMap32:
		return validateListOrMap(r, code, depth)
	case TypeCodeArray8, TypeCodeArray32:
		return validateArray(r, code, depth)
	case TypeCodeVbin8, TypeCodeStr8, TypeCodeSym8:
		_, err := readVariable(r, false)
		return err
	case TypeCodeVbin32, TypeCodeStr32, TypeCodeSym32:
		_, err := readVariable(r, true)
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

func validateListOrMap(r *buffer.Buffer, code byte, depth int) error {
	if depth >= MaxDepth {
		return malformed("nesting deeper than %d", MaxDepth)
	}
	code8, code32 := TypeCodeList8, TypeCodeList32
	isMap := code == TypeCodeMap8 || code == TypeCodeMap32
	if isMap {
		code8, code32 = TypeCodeMap8, TypeCodeMap32
	}
	content, count, err := readCompoundHeader(r, code, code8, code32, true)
	if err != nil {
		return err
	}
	if isMap && count%2 != 0 {
		return malformed("map has an odd element count %d", count)
	}
	sub := buffer.Make(content)
	for range count {
		if err := validate(&sub, depth+1); err != nil {
			return err
		}
	}
	if sub.Len() != 0 {
		return malformed("list or map has %d trailing bytes", sub.Len())
	}
	return nil
}

func validateArray(r *buffer.Buffer, code byte, depth int) error {
	if depth >= MaxDepth {
		return malformed("nesting deeper than %d", MaxDepth)
	}
	content, count, err := readCompoundHeader(r, code, TypeCodeArray8, TypeCodeArray32, false)
	if err != nil {
		return err
	}
	sub := buffer.Make(content)
	elem, err := sub.ReadByte()
	if err != nil {
		return malformed("array without element constructor")
	}
	if elem == TypeCodeDescribed {
		if err := validate(&sub, depth+1); err != nil {
			return err
		}
		if elem, err = sub.ReadByte(); err != nil {
			return malformed("array without element constructor")
		}
		if elem == TypeCodeDescribed {
			return malformed("array element constructor is described twice")
		}
	}
	switch fixedWidth(elem) {
	case 0:
		// Elements that take no bytes: nothing to check per element, and
		// looping over a count of billions would take seconds.
	default:
		if count > sub.Len() {
			return malformed("array count %d exceeds its size", count)
		}
		for range count {
			if err := validateValue(&sub, elem, depth+1); err != nil {
				return err
			}
		}
	}
	if sub.Len() != 0 {
		return malformed("array has %d trailing bytes", sub.Len())
	}
	return nil
}
