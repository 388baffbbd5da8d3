package httpgw

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"go.uber.org/zap"
)

// middleware wraps the router: it refuses peers [Config.Admit] turns away
// and host names [Config.CheckHost] does not answer to, trims trailing slashes (Node sends "…/Subscriptions/"), recovers from
// handler panics with a 500, closes connections whose request body was
// not read, names the server and logs each request at debug level.
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
		// A shallow copy carries the watched body, so the server's own view
		// of the request is untouched.
		r = r.WithContext(r.Context())
		rec := &statusRecorder{ResponseWriter: w, req: r}
		if r.Body != nil {
			rec.body = &bodyWatch{ReadCloser: r.Body}
			r.Body = rec.body
		}
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
			g.countRequest(r, rec.status)
			if ce := g.log.Check(zap.DebugLevel, "request"); ce != nil {
				ce.Write(zap.String("method", r.Method), zap.String("path", r.URL.Path),
					zap.Int("status", rec.status), zap.Duration("took", time.Since(start)))
			}
		}()
		if g.cfg.Admit != nil {
			if err := g.cfg.Admit(remoteAddr(r)); err != nil {
				rec.Header().Set("Connection", "close")
				g.writeError(rec, r, http.StatusForbidden, err.Error())
				return
			}
		}
		if g.cfg.CheckHost != nil {
			if err := g.cfg.CheckHost(r.Host); err != nil {
				rec.Header().Set("Connection", "close")
				g.writeError(rec, r, http.StatusMisdirectedRequest, err.Error())
				return
			}
		}
		next.ServeHTTP(rec, r)
	})
}

// remoteAddr is the request's peer as a net.Addr (an unspecified address
// when the server gave none that parses).
func remoteAddr(r *http.Request) net.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(ap)
}

// unreadBodyGrace is how long the server may go on reading a request
// body its handler left unread, once the answer is out, before it closes
// the connection.
const unreadBodyGrace = 250 * time.Millisecond

// statusRecorder remembers the status a handler wrote, and closes the
// connection after the answer when it goes out before the request body
// was read to its end: the server would otherwise read the rest of the
// body, however slowly it arrives (a 401 to a trickled body).
type statusRecorder struct {
	http.ResponseWriter
	req    *http.Request
	body   *bodyWatch
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
		if s.body != nil && s.body.unread(s.req) {
			// After the handler the server reads on (up to 256 KiB) to
			// the body's end before it closes, however slowly the body
			// comes: the read deadline bounds that to unreadBodyGrace. A
			// body already on its way is read in that time, so the
			// connection closes cleanly and the client reads the answer;
			// closed with the body unread, it would be reset, and a client
			// still writing would see the reset instead of the answer.
			s.Header().Set("Connection", "close")
			_ = http.NewResponseController(s.ResponseWriter).SetReadDeadline(time.Now().Add(unreadBodyGrace))
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
