package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// Who may ask what of the peer port, with credentials (Config.TLS):
//
//   - the TLS handshake refuses a client certificate that this cluster's
//     CA did not issue, or that expired (logged with the reason);
//   - nothing under /raft/ answers a client without a certificate (403);
//   - a stream or a snapshot is taken only from the node the client's
//     certificate names: its Omnibus-Raft-From header, and every frame's
//     and message's sender, must be that node (403);
//   - membership changes and join tokens also need the Manage key
//     (Config.Admin; 401);
//   - POST /join, the one path a node without a certificate may use,
//     answers only a valid join token (jointoken.go).
//
// Without credentials (Config.Insecure) the headers are believed: anyone
// who reaches the port is a member.

// peerIDKey is the request context's key for the node id the client's
// certificate names.
type peerIDKey struct{}

// serverTLS is the peer port's TLS configuration: each handshake gets
// one that logs, with the client's address, why its certificate was
// refused.
func (t *httpTransport) serverTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		remote := hi.Conn.RemoteAddr().String()
		return t.sec.creds.ServerConfig(func(err error) {
			t.refusals.warn(t.log, "refused a peer connection: its certificate", zap.String("remote", remote), zap.Error(err))
		}), nil
	}}
}

// guard refuses every request under /raft/ from a client without a
// certificate; the others get the id their certificate names in their
// context (the handshake checked the certificate itself).
func (t *httpTransport) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t.sec.creds == nil || !strings.HasPrefix(r.URL.Path, "/raft/") {
			next.ServeHTTP(w, r)
			return
		}
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			t.refuse(w, r, http.StatusForbidden, peertls.ErrNoCertificate.Error()+": the peer port serves the cluster's members only")
			return
		}
		id, err := peertls.NodeID(r.TLS.PeerCertificates[0])
		if err != nil {
			t.refuse(w, r, http.StatusForbidden, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerIDKey{}, id)))
	})
}

// refuse answers r with code and why, and logs it.
func (t *httpTransport) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	t.refusals.warn(t.log, "refused a peer request", zap.String("remote", r.RemoteAddr),
		zap.String("path", r.URL.Path), zap.Int("status", code), zap.String("reason", why))
	http.Error(w, why, code)
}

// checkSender returns the sender's id, checking the request is for this
// node and, with TLS, that the sender is the node its certificate names.
// It answers the request itself when it refuses (ok false).
func (t *httpTransport) checkSender(w http.ResponseWriter, r *http.Request) (from uint64, ok bool) {
	from, err1 := strconv.ParseUint(r.Header.Get(headerFrom), 10, 64)
	to, err2 := strconv.ParseUint(r.Header.Get(headerTo), 10, 64)
	switch {
	case err1 != nil || err2 != nil || from == 0:
		t.refuse(w, r, http.StatusBadRequest, "missing or bad raft headers")
		return 0, false
	case to != t.id:
		t.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("this is node %d, not %d", t.id, to))
		return 0, false
	}
	if id, ok := r.Context().Value(peerIDKey{}).(uint64); ok && id != from {
		t.refuse(w, r, http.StatusForbidden, fmt.Sprintf("%v: the client's certificate names node %d, its request node %d",
			peertls.ErrWrongNode, id, from))
		return 0, false
	}
	return from, true
}

// adminOnly wraps a handler of a request that changes the cluster: it
// also needs the Manage key.
func (t *httpTransport) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t.sec.admin == nil {
			t.refuse(w, r, http.StatusForbidden, "this node takes no admin requests (no key configured)")
			return
		}
		if err := t.sec.admin(r); err != nil {
			t.refuse(w, r, http.StatusUnauthorized, "the Manage key is needed: "+err.Error())
			return
		}
		h(w, r)
	}
}

// refusalLog rate-limits the warnings refusals log: a peer that retries
// (or floods) is heard a few times a second, with a count of the others.
type refusalLog struct {
	mu         sync.Mutex // guards the fields below
	windowFrom time.Time
	logged     int
	dropped    int
}

const refusalsPerSecond = 10

func (l *refusalLog) warn(log *zap.Logger, msg string, fields ...zap.Field) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.windowFrom) >= time.Second {
		if l.dropped > 0 {
			log.Warn("more refusals not logged", zap.Int("count", l.dropped))
		}
		l.windowFrom, l.logged, l.dropped = now, 0, 0
	}
	if l.logged >= refusalsPerSecond {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.logged++
	l.mu.Unlock()
	log.Warn(msg, fields...)
}

// refusalWriter takes net/http's error log of the peer port (a TLS
// handshake that failed, a request it could not read: what any stranger
// can cause) into the rate-limited warnings.
type refusalWriter struct{ t *httpTransport }

func (w refusalWriter) Write(p []byte) (int, error) {
	w.t.refusals.warn(w.t.log, "peer port", zap.String("http", strings.TrimSpace(string(p))))
	return len(p), nil
}

// isAuthRefusal reports whether a dial failed on the other end's
// identity (or it on ours): worth a warning, unlike a peer that is down.
func isAuthRefusal(err error) bool {
	var alert tls.AlertError
	return errors.As(err, &alert) || errors.Is(err, peertls.ErrUntrusted) || errors.Is(err, peertls.ErrWrongNode) ||
		errors.Is(err, peertls.ErrExpired) || errors.Is(err, peertls.ErrNoCertificate)
}
