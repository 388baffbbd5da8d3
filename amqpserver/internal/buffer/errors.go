package buffer

import "errors"

// ErrShort is returned by the read methods when fewer bytes remain than the
// read needs.
var ErrShort = errors.New("buffer: not enough data")
