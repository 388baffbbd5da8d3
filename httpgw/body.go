package httpgw

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/core/membudget"
)

// errBodyTooLarge is returned by readBody when the body exceeds the limit.
var errBodyTooLarge = errors.New("request body too large")

// errMemory is returned by readBody when the memory budget has no room
// for the body.
var errMemory = errors.New("httpgw: the memory budget is used up")

// readBody reads the request body if it holds at most limit bytes. A
// larger Content-Length is refused before anything is read; a body of
// unknown length (chunked) is read only up to the limit. Either way the
// connection is closed after the answer rather than drained (see
// bodyWatch), so a refused body is never read to its end.
//
// The buffer is taken from mem as it grows (membudget.HTTPRequest); held
// is what the caller gives back once it lets go of the body. When mem
// has no room readBody gives back what it took and returns errMemory.
func readBody(r *http.Request, limit int64, mem *membudget.Budget) (b []byte, held int64, err error) {
	if r.ContentLength > limit {
		return nil, 0, errBodyTooLarge
	}
	if r.ContentLength < 0 {
		b, held, err = readUpTo(r.Body, limit+1, false, mem)
		if err == nil && int64(len(b)) > limit {
			mem.Release(held)
			return nil, 0, errBodyTooLarge
		}
		return b, held, err
	}
	b, held, err = readUpTo(r.Body, r.ContentLength, true, mem)
	if err != nil {
		return nil, 0, err
	}
	// Read on to the end, so the body is known to be consumed and the
	// connection can serve the next request.
	var extra [1]byte
	if n, err := r.Body.Read(extra[:]); n > 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = errors.New("the body is longer than its Content-Length")
		}
		mem.Release(held)
		return nil, 0, err
	}
	return b, held, nil
}

// readUpTo reads up to n bytes: exactly n when exact (io.ErrUnexpectedEOF
// if the body ends before), else until EOF. Memory grows with the bytes
// that arrive, not with the length announced, so a peer that announces a
// large body and sends it slowly holds little; each growth is taken from
// mem first.
func readUpTo(r io.Reader, n int64, exact bool, mem *membudget.Budget) (b []byte, held int64, err error) {
	defer func() {
		if err != nil {
			mem.Release(held)
			b, held = nil, 0
		}
	}()
	grow := func(size int64) error {
		if !mem.TryAcquire(membudget.HTTPRequest, size-held) {
			return errMemory
		}
		held = size
		nb := make([]byte, len(b), size)
		copy(nb, b)
		b = nb
		return nil
	}
	if err := grow(min(n, firstBodyChunk)); err != nil {
		return nil, 0, err
	}
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			if err := grow(min(n, 2*int64(cap(b)))); err != nil {
				return b, held, err
			}
		}
		m, rerr := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if rerr == io.EOF {
			if exact && int64(len(b)) < n {
				return b, held, io.ErrUnexpectedEOF
			}
			return b, held, nil
		}
		if rerr != nil {
			return b, held, rerr
		}
	}
	return b, held, nil
}

// firstBodyChunk is the buffer a body is first read into.
const firstBodyChunk = 64 << 10

// bodyWatch wraps a request body to learn whether it was read to its end.
type bodyWatch struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// unread reports whether the request declared a body that was not read
// to its end.
func (b *bodyWatch) unread(r *http.Request) bool {
	return r.ContentLength != 0 && !b.eof.Load()
}
