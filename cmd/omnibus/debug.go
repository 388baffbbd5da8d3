package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"
)

// debugServer serves Go's runtime profiles (/debug/pprof/) on their own
// listener, apart from the broker's fronts, so an operator can profile a
// running broker without exposing the profiles on a public port.
type debugServer struct {
	srv *http.Server
	ln  net.Listener
}

// startDebug listens on addr and serves the profiles until shutdown.
func startDebug(addr string, log *zap.Logger) (*debugServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	d := &debugServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln: ln}
	go func() {
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug listener stopped", zap.Error(err))
		}
	}()
	return d, nil
}

// Addr is the address the profiles are served on.
func (d *debugServer) Addr() net.Addr { return d.ln.Addr() }

// Shutdown stops the listener; profiles in progress are cut short.
func (d *debugServer) Shutdown(ctx context.Context) error { return d.srv.Shutdown(ctx) }
