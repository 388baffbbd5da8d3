package encoding

import (
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every decoding error: truncated input, an
// unexpected constructor, a length larger than the input, invalid UTF-8 where
// the type requires it, or nesting deeper than [MaxDepth]. A server maps it
// to the amqp:decode-error condition.
var ErrMalformed = errors.New("encoding: malformed AMQP data")

// ErrUnsupported is returned by [Marshal] for Go values that have no AMQP
// encoding (for example a channel or a struct that is not a [Marshaler]).
var ErrUnsupported = errors.New("encoding: unsupported Go type")

// MaxDepth is the deepest nesting of lists, maps, arrays and described
// values that the decoder accepts. Real AMQP traffic nests a handful of
// levels; the limit keeps hostile input from exhausting the stack.
const MaxDepth = 64

// malformed builds an error wrapping [ErrMalformed].
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// errShort is the error for input that ends in the middle of a value.
var errShort = fmt.Errorf("%w: unexpected end of data", ErrMalformed)
