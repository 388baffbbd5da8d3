package httpgw

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
)

// Receive long-poll bounds: the wait when the request names none (what
// the Python and Ruby SDKs send) and the longest accepted.
const (
	defaultReceiveTimeout = 60 * time.Second
	maxReceiveTimeout     = time.Hour
)

// peekLock handles POST {path}/messages/head: lock the next message and
// answer 201 with it, or 204 when none arrived within ?timeout=N seconds
// (rest.md §1.5).
func (g *Gateway) peekLock(w http.ResponseWriter, r *http.Request) {
	g.receive(w, r, core.PeekLock)
}

// receiveAndDelete handles DELETE {path}/messages/head: remove the next
// message and answer 200 with it, or 204 (rest.md §1.6).
func (g *Gateway) receiveAndDelete(w http.ResponseWriter, r *http.Request) {
	g.receive(w, r, core.ReceiveAndDelete)
}

func (g *Gateway) receive(w http.ResponseWriter, r *http.Request, mode core.ReceiveMode) {
	path := mux.Vars(r)["entity"]
	timeout, err := receiveTimeout(r.URL.Query())
	if err != nil {
		g.badRequest(w, r, "%v", err)
		return
	}
	// The server's write timeout runs from the end of the request headers:
	// give the answer to a long poll the same time after the wait.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout + g.cfg.WriteTimeout))
	if g.cfg.Memory.Over() {
		g.cfg.Memory.Refuse(membudget.HTTPAnswer)
		g.refuseMemory(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	unhook := context.AfterFunc(g.stopping, cancel) // a shutdown ends the wait
	msgs, err := g.broker(r).Receive(ctx, path, core.ReceiveOptions{Mode: mode, Max: 1})
	unhook()
	cancel()
	if errors.Is(err, context.Canceled) && r.Context().Err() == nil && g.stopping.Err() != nil {
		msgs, err = nil, nil // shutting down: the wait ended empty
	}
	if err != nil {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	if len(msgs) == 0 {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m := msgs[0]
	// The message is here: its body is counted while it is written.
	g.cfg.Memory.Acquire(int64(len(m.Body)))
	defer g.cfg.Memory.Release(int64(len(m.Body)))
	h := w.Header()
	status := http.StatusOK
	if mode == core.PeekLock {
		status = http.StatusCreated
		h.Set("Location", lockLocation(r, path, m))
	}
	writeMessageHeaders(h, m)
	w.WriteHeader(status)
	_, _ = w.Write(m.Body)
}

// writeMessageHeaders sets the headers that carry a received message:
// BrokerProperties, Content-Type (absent when the message has none, with
// sniffing disabled), Content-Length and the custom properties.
//
// Properties the broker keeps encoded are decoded here; ones that cannot
// be (only a damaged record could hold such, which `omnibus check`
// reports) are left out rather than losing the message, which the
// receive has already taken.
func writeMessageHeaders(h http.Header, m *core.Message) {
	props, _ := m.Properties()
	writePropertyHeaders(h, props)
	h[headerBrokerProperties] = []string{formatBrokerProperties(m)} // the service's spelling
	if m.ContentType != "" {
		h.Set("Content-Type", m.ContentType)
	} else {
		h["Content-Type"] = nil
	}
	h.Set("Content-Length", strconv.Itoa(len(m.Body)))
}

// receiveTimeout reads ?timeout=N (seconds, may be fractional).
func receiveTimeout(q url.Values) (time.Duration, error) {
	s := strings.TrimSpace(q.Get("timeout"))
	if s == "" {
		return defaultReceiveTimeout, nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || secs < 0 || secs != secs {
		return 0, &paramError{"timeout", s, "a non-negative number of seconds"}
	}
	d := time.Duration(secs * float64(time.Second))
	if secs > maxReceiveTimeout.Seconds() {
		d = maxReceiveTimeout
	}
	return d, nil
}

// lockLocation is the peek-lock Location header:
// {scheme}://{host}/{lower-cased entity path}/messages/{seq}/{lockToken}
// (rest.md §0.4). The scheme and host are the request's, so clients that
// replay the URL reach this gateway.
func lockLocation(r *http.Request, path string, m *core.Message) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: r.Host,
		Path: "/" + strings.ToLower(strings.Trim(path, "/")) + "/messages/" +
			strconv.FormatInt(m.SequenceNumber, 10) + "/" + m.LockToken.String()}
	return u.String()
}

// paramError is a malformed query parameter.
type paramError struct{ name, value, want string }

func (e *paramError) Error() string {
	return "The query parameter '" + e.name + "' value '" + e.value + "' is not " + e.want
}
