package httpgw

import (
	"log"
	"strings"

	"go.uber.org/zap"
)

// serverErrorLog is the log an [http.Server] of the gateway writes its own
// errors to. A TLS handshake that fails is the client's doing (one that
// does not trust the certificate, plain HTTP on the HTTPS port, a socket
// that never starts the handshake): it goes to debug level, like the
// AMQPS listener's, so that a peer cannot fill the log. Everything else
// (accept errors, panics in handlers, requests net/http complains about,
// such as a query with a semicolon) goes out at info level under one
// message, with net/http's text as a field: the gateway's log limiter
// spaces lines by message, and net/http's texts name the peer.
func serverErrorLog(l *zap.Logger) *log.Logger {
	return log.New(serverErrorWriter{l}, "", 0)
}

type serverErrorWriter struct{ log *zap.Logger }

// serverErrorMessage is the message of every line net/http logs.
const serverErrorMessage = "HTTP server error"

func (w serverErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		w.log.Debug(msg)
	} else {
		w.log.Info(serverErrorMessage, zap.String("error", msg))
	}
	return len(p), nil
}
