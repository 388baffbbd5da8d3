package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver"
	"github.com/omnibusmq/omnibus/httpgw"
	"github.com/omnibusmq/omnibus/storage"
)

// startFronts starts the AMQP listeners (plain and TLS, one server) and
// the HTTP(S) gateway on the configured addresses. Listening happens
// here, synchronously, so a port in use is reported by Start and the
// addresses are known on return.
func (a *App) startFronts() error {
	o := a.opts
	protect := newProtection(o)
	if msg := protect.describe(); msg != "" {
		a.log.Info(msg)
	}
	hosts, err := newHostPolicy(o)
	if err != nil {
		return err
	}
	if hosts != nil {
		hosts.namespace = func(label string) bool { _, err := a.Namespaces.Get(label); return err == nil }
	}
	origins, err := newOriginPolicy(o)
	if err != nil {
		return err
	}
	var cert tls.Certificate
	if !disabled(o.AMQPSAddr) || !disabled(o.HTTPSAddr) {
		if cert, err = a.certificate(); err != nil {
			return err
		}
	}
	var comps []httpgw.Component // what /health reports on: each listener, then the store
	var webSocket http.Handler   // AMQP over WebSockets on the HTTP(S) listeners
	// The AMQP server serves its own listeners and AMQP over WebSockets on
	// the HTTP ones.
	if !disabled(o.AMQPAddr) || !disabled(o.AMQPSAddr) || !disabled(o.HTTPAddr) || !disabled(o.HTTPSAddr) {
		cfg := amqpserver.Config{Namespaces: a.Namespaces, Logger: o.Logger.Named("amqp"),
			MaxConnections: o.MaxConnections, MaxPendingConnections: o.MaxPendingConnections,
			AuthTimeout: o.AuthTimeout, Limits: o.AMQPLimits, LogLimiter: a.logLimit, Memory: a.Memory}
		if protect.on {
			cfg.Admit = protect.admit
		}
		if origins != nil {
			cfg.CheckOrigin = origins.check
		}
		srv, err := amqpserver.New(cfg)
		if err != nil {
			return err
		}
		a.fronts = append(a.fronts, amqpFront{srv})
		a.amqp = srv
		webSocket = srv.WebSocketHandler()
		if !disabled(o.AMQPAddr) || !disabled(o.AMQPSAddr) {
			// One server behind both listeners: its health covers both.
			comps = append(comps, httpgw.Component{Name: "amqp", Health: srv.Health})
		}
		if !disabled(o.AMQPAddr) {
			if a.amqpAddr, err = a.serveAMQP(srv, o.AMQPAddr, nil); err != nil {
				return fmt.Errorf("AMQP listener: %w", err)
			}
		}
		if !disabled(o.AMQPSAddr) {
			if a.amqpsAddr, err = a.serveAMQP(srv, o.AMQPSAddr, serverTLS(cert)); err != nil {
				return fmt.Errorf("AMQPS listener: %w", err)
			}
		}
	}
	if disabled(o.HTTPAddr) && disabled(o.HTTPSAddr) {
		return nil
	}
	var httpHealth, httpsHealth *listenerHealth
	if !disabled(o.HTTPAddr) {
		httpHealth = a.listenerHealth("http", &comps)
	}
	if !disabled(o.HTTPSAddr) {
		httpsHealth = a.listenerHealth("https", &comps)
	}
	cfg := httpgw.Config{Namespaces: a.Namespaces, Logger: o.Logger.Named("http"),
		ReadTimeout: o.HTTPReadTimeout, WriteTimeout: o.HTTPWriteTimeout, IdleTimeout: o.HTTPIdleTimeout,
		MaxConnections: o.HTTPMaxConnections, Components: append(comps, a.storeComponent()), WebSocket: webSocket,
		LogLimiter: a.logLimit, Memory: a.Memory}
	if protect.on {
		cfg.Admit = protect.admit
	}
	if hosts != nil {
		cfg.CheckHost = hosts.check
		a.log.Info(hosts.describe())
	}
	gw, err := httpgw.New(cfg)
	if err != nil {
		return err
	}
	a.gw = gw
	if httpHealth != nil {
		addr, err := a.serveHTTP(gw, o.HTTPAddr, nil, httpHealth)
		if err != nil {
			return fmt.Errorf("HTTP listener: %w", err)
		}
		a.httpAddr = addr
	}
	if httpsHealth != nil {
		addr, err := a.serveHTTP(gw, o.HTTPSAddr, serverTLS(cert), httpsHealth)
		if err != nil {
			return fmt.Errorf("HTTPS listener: %w", err)
		}
		a.httpsAddr = addr
	}
	return nil
}

// serverTLS is the TLS configuration of the AMQPS and HTTPS listeners.
// Each listener gets its own (HTTP/2 would add to NextProtos).
func serverTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// serveAMQP serves srv on a new listener on addr, over TLS when tlsConf
// is set: the TLS handshake then runs within the AMQP handshake's time
// limit, and a failed one closes only that connection.
func (a *App) serveAMQP(srv *amqpserver.Server, addr string, tlsConf *tls.Config) (net.Addr, error) {
	front := "amqp"
	if tlsConf != nil {
		front = "amqps"
	}
	l, err := a.listen(front, addr)
	if err != nil {
		return nil, err
	}
	bound := l.Addr()
	if tlsConf != nil {
		l = tls.NewListener(l, tlsConf)
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, amqpserver.ErrServerClosed) {
			a.log.Error("AMQP server stopped", zap.Stringer("listener", bound), zap.Error(err))
		}
	}()
	return bound, nil
}

func (a *App) serveHTTP(gw *httpgw.Gateway, addr string, tlsConf *tls.Config, h *listenerHealth) (net.Addr, error) {
	srv := gw.Server(addr)
	front := "http"
	if tlsConf != nil {
		front = "https"
	}
	l, err := a.listen(front, addr)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		srv.TLSConfig = tlsConf
	}
	go func() {
		if err := srv.Serve(gw.Listener(h.watch(l), tlsConf)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.stop(err)
			a.log.Error("HTTP server stopped", zap.Error(err))
		}
	}()
	a.fronts = append(a.fronts, httpFront{srv})
	return l.Addr(), nil
}

// listen opens a front's listener: Options.Listen's, or a new one.
func (a *App) listen(front, addr string) (net.Listener, error) {
	if a.opts.Listen != nil {
		return a.opts.Listen(front, addr)
	}
	return net.Listen("tcp", addr)
}

// listenerHealth returns the health of a new listener, reported on
// /health under name.
func (a *App) listenerHealth(name string, comps *[]httpgw.Component) *listenerHealth {
	h := &listenerHealth{}
	*comps = append(*comps, httpgw.Component{Name: name, Health: h.Health})
	return h
}

// storeComponent reports the store on /health: healthy while it accepts
// writes, as far as it can tell (storage.HealthReporter).
func (a *App) storeComponent() httpgw.Component {
	health := func() error { return nil }
	if hr, ok := a.store.(storage.HealthReporter); ok {
		health = hr.Health
	}
	return httpgw.Component{Name: "store", Health: health}
}

// certificate returns the certificate of the HTTPS and AMQPS listeners:
// the configured PEM files, or one issued by the local CA kept in TLSDir
// (see httpgw.LoadOrCreateCertificates), whose CA file it logs.
func (a *App) certificate() (tls.Certificate, error) {
	o := a.opts
	if o.TLSCert != "" || o.TLSKey != "" {
		c, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return c, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		return c, nil
	}
	f, err := httpgw.LoadOrCreateCertificates(TLSDir(o), o.TLSHosts)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("TLS certificate: %w", err)
	}
	a.CAPath = f.CAPath
	if f.NewCA {
		a.log.Warn("generated a new local CA for HTTPS and AMQPS: clients must trust it (see `omnibus cert`)", zap.String("ca", f.CAPath))
	} else {
		a.log.Info("HTTPS and AMQPS use a certificate of the local CA; clients trust the CA", zap.String("ca", f.CAPath))
	}
	return f.Certificate, nil
}

// TLSDir is where o keeps the generated TLS certificate: Options.TLSDir,
// else the data directory, or with Memory (which writes nothing there) a
// directory in the system's temporary one, shared by such runs.
func TLSDir(o Options) string {
	switch {
	case o.TLSDir != "":
		return o.TLSDir
	case o.Memory:
		return filepath.Join(os.TempDir(), "omnibus-tls")
	case o.DataDir == "":
		return DefaultDataDir
	}
	return o.DataDir
}

type amqpFront struct{ s *amqpserver.Server }

func (f amqpFront) shutdown(ctx context.Context) error { return f.s.Shutdown(ctx) }

type httpFront struct{ s *http.Server }

func (f httpFront) shutdown(ctx context.Context) error { return f.s.Shutdown(ctx) }
