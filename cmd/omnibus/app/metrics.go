package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/cmd/omnibus/metrics"
)

// DefaultMetricsAddr is where the omnibus binary serves /metrics unless
// told otherwise (--metrics-addr). In [Options] an empty MetricsAddr
// means no metrics listener.
const DefaultMetricsAddr = ":5301"

// Bounds of the metrics listener, which nobody needs a token for: idle
// or half-sent connections must not keep Prometheus out. At
// MaxMetricsConnections a new connection takes the place of the one that
// has gone longest without being answered (metricsconns.go); a request's
// headers must arrive within metricsHeaderTimeout, and a keep-alive idle
// for metricsIdleTimeout is closed (Prometheus scrapes every 15 s to 1 min
// and reconnects when it must).
const (
	MaxMetricsConnections = 64
	metricsHeaderTimeout  = 2 * time.Second
	metricsReadTimeout    = 5 * time.Second
	metricsWriteTimeout   = 30 * time.Second
	metricsIdleTimeout    = 30 * time.Second
)

// startMetrics serves the Prometheus metrics on their own listener,
// without authentication, as Prometheus scrapes. Protected mode applies
// as on the other listeners: with the publicly known key only loopback
// peers are served.
func (a *App) startMetrics() error {
	o := a.opts
	if !a.metricsOn() {
		return nil
	}
	fronts := []metrics.Front{}
	if a.amqp != nil {
		srv := a.amqp
		fronts = append(fronts, metrics.Front{Protocol: "amqp", Stats: func() metrics.FrontStats {
			s := srv.Stats()
			return metrics.FrontStats{ConnectionsOpened: s.ConnectionsOpened, ConnectionsClosed: s.ConnectionsClosed,
				ActiveConnections: s.ActiveConnections, Successful: s.Requests.Successful, UserErrors: s.Requests.UserErrors,
				ServerErrors: s.Requests.ServerErrors, Throttled: s.Requests.Throttled}
		}})
	}
	if a.gw != nil {
		gw := a.gw
		fronts = append(fronts, metrics.Front{Protocol: "http", Stats: func() metrics.FrontStats {
			s := gw.Stats()
			return metrics.FrontStats{ConnectionsOpened: s.ConnectionsOpened, ConnectionsClosed: s.ConnectionsClosed,
				ActiveConnections: s.ActiveConnections, Successful: s.Successful, UserErrors: s.UserErrors,
				ServerErrors: s.ServerErrors, Throttled: s.Throttled}
		}})
	}
	reg := a.Namespaces
	namespaces := func() []metrics.Namespace {
		all := reg.List()
		out := make([]metrics.Namespace, len(all))
		for i, ns := range all {
			out[i] = metrics.Namespace{Name: ns.Name(), Broker: ns.Broker()}
		}
		return out
	}
	cfg := metrics.Config{Namespaces: namespaces, MaxEntities: o.MetricsMaxEntities, Fronts: fronts,
		Batches: a.batches, Logger: o.Logger.Named("metrics"), NoRuntime: o.metricsSink != nil,
		LogSuppressed: a.logLimit.Suppressed, Memory: a.Memory, PeerCalls: o.peerCalls}
	if fr, ok := a.store.(metrics.FsyncReporter); ok {
		cfg.Store = fr
	}
	m, err := metrics.New(cfg)
	if err != nil {
		return err
	}
	if o.metricsSink != nil {
		o.metricsSink(m)
		return nil
	}
	srv, addr, err := serveMetrics(o, m.Handler())
	if err != nil {
		return err
	}
	a.metricsAddr = addr
	a.fronts = append(a.fronts, httpFront{srv})
	return nil
}

// serveMetrics serves h at /metrics on a listener of its own at
// o.MetricsAddr, with protected mode and the host policy (hosts.go) of
// the other HTTP listeners.
func serveMetrics(o Options, h http.Handler) (*http.Server, net.Addr, error) {
	hosts, err := newHostPolicy(o)
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics listener: %w", err)
	}
	protect := newProtection(o)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "omnibus serves its Prometheus metrics at /metrics", http.StatusNotFound)
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if protect.on {
			if err := protect.admit(peerOf(r)); err != nil {
				w.Header().Set("Connection", "close")
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		if err := hosts.check(r.Host); err != nil {
			w.Header().Set("Connection", "close")
			http.Error(w, err.Error(), http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
	el := newEvictingListener(l, MaxMetricsConnections)
	srv := &http.Server{Handler: el.serving(handler), ConnState: el.connState, ConnContext: el.connContext,
		ReadHeaderTimeout: metricsHeaderTimeout, ReadTimeout: metricsReadTimeout, WriteTimeout: metricsWriteTimeout,
		IdleTimeout: metricsIdleTimeout, MaxHeaderBytes: 16 << 10, ErrorLog: o.LogLimiter.StdLog(o.Logger.Named("metrics"), "metrics listener error")}
	go func() {
		if err := srv.Serve(el); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("metrics listener stopped", zap.Error(err))
		}
	}()
	return srv, l.Addr(), nil
}

// metricsOn reports whether the app serves metrics (and so keeps the
// core's statistics).
func (a *App) metricsOn() bool { return a.opts.MetricsAddr != "" && !disabled(a.opts.MetricsAddr) }

// peerOf returns the request's peer address.
func peerOf(r *http.Request) net.Addr {
	ap, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return nil
	}
	return ap
}

// MetricsAddr is the metrics listener's address (nil when disabled).
func (a *App) MetricsAddr() net.Addr { return a.metricsAddr }
