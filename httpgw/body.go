package httpgw

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// errBodyTooLarge is returned by readBody when the body exceeds the limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads the request body if it holds at most limit bytes. A
// larger Content-Length is refused before anything is read; a body of
// unknown length (chunked) is read only up to the limit. Either way the
// connection is closed after the answer rather than drained (see
// bodyWatch), so a refused body is never read to its end.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	if r.ContentLength >= 0 {
		b, err := readExactly(r.Body, r.ContentLength)
		if err != nil {
			return nil, err
		}
		// Read on to the end, so the body is known to be consumed and the
		// connection can serve the next request.
		var extra [1]byte
		if n, err := r.Body.Read(extra[:]); n > 0 || (err != nil && err != io.EOF) {
			if err == nil {
				err = errors.New("the body is longer than its Content-Length")
			}
			return nil, err
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errBodyTooLarge
	}
	return b, nil
}

// readExactly reads n bytes. Memory grows with the bytes that arrive, not
// with the length announced, so a peer that announces a large body and
// sends it slowly holds little.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	b := make([]byte, 0, min(n, firstBodyChunk))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, 2*int64(cap(b))))
			copy(nb, b)
			b = nb
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF && int64(len(b)) < n {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	return b, nil
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
