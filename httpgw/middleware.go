package httpgw

import (
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// middleware wraps the router: it trims trailing slashes (Node sends
// "…/Subscriptions/"), recovers from handler panics with a 500, names the
// server and logs each request at debug level.
func (g *Gateway) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			r.URL.Path = strings.TrimRight(p, "/")
			if r.URL.Path == "" {
				r.URL.Path = "/"
			}
			r.URL.RawPath = ""
		}
		w.Header().Set("Server", "omnibus")
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				g.log.Error("handler panic", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Any("panic", v), zap.Stack("stack"))
				if rec.status == 0 {
					g.writeError(rec, r, http.StatusInternalServerError, "SubCode=50000. Internal error")
				}
			}
			if ce := g.log.Check(zap.DebugLevel, "request"); ce != nil {
				ce.Write(zap.String("method", r.Method), zap.String("path", r.URL.Path),
					zap.Int("status", rec.status), zap.Duration("took", time.Since(start)))
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
