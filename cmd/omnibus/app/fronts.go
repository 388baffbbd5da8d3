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

// startFronts starts the AMQP listener and the HTTP(S) gateway on the
// configured addresses. Listening happens here, synchronously, so a port
// in use is reported by Start and the addresses are known on return.
func (a *App) startFronts() error {
	o := a.opts
	protect := newProtection(o)
	if msg := protect.describe(); msg != "" {
		a.log.Info(msg)
	}
	var comps []httpgw.Component // what /health reports on: each listener, then the store
	if !disabled(o.AMQPAddr) {
		cfg := amqpserver.Config{Broker: a.Broker, Logger: o.Logger.Named("amqp"),
			Auth: a.Auth, MaxConnections: o.MaxConnections, MaxPendingConnections: o.MaxPendingConnections,
			AuthTimeout: o.AuthTimeout, Limits: o.AMQPLimits}
		if protect.on {
			cfg.Admit = protect.admit
		}
		srv, err := amqpserver.New(cfg)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", o.AMQPAddr)
		if err != nil {
			return fmt.Errorf("AMQP listener: %w", err)
		}
		a.amqpAddr = l.Addr()
		comps = append(comps, httpgw.Component{Name: "amqp", Health: srv.Health})
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, amqpserver.ErrServerClosed) {
				a.log.Error("AMQP server stopped", zap.Error(err))
			}
		}()
		a.fronts = append(a.fronts, amqpFront{srv})
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
	cfg := httpgw.Config{Broker: a.Broker, Logger: o.Logger.Named("http"), Auth: a.Auth, Namespace: a.Namespace,
		ReadTimeout: o.HTTPReadTimeout, WriteTimeout: o.HTTPWriteTimeout, IdleTimeout: o.HTTPIdleTimeout,
		MaxConnections: o.HTTPMaxConnections, Components: append(comps, a.storeComponent())}
	if protect.on {
		cfg.Admit = protect.admit
	}
	gw, err := httpgw.New(cfg)
	if err != nil {
		return err
	}
	if httpHealth != nil {
		addr, err := a.serveHTTP(gw, o.HTTPAddr, nil, httpHealth)
		if err != nil {
			return fmt.Errorf("HTTP listener: %w", err)
		}
		a.httpAddr = addr
	}
	if httpsHealth != nil {
		cert, err := a.certificate()
		if err != nil {
			return err
		}
		addr, err := a.serveHTTP(gw, o.HTTPSAddr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, httpsHealth)
		if err != nil {
			return fmt.Errorf("HTTPS listener: %w", err)
		}
		a.httpsAddr = addr
	}
	return nil
}

func (a *App) serveHTTP(gw *httpgw.Gateway, addr string, tlsConf *tls.Config, h *listenerHealth) (net.Addr, error) {
	srv := gw.Server(addr)
	l, err := net.Listen("tcp", addr)
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

// certificate returns the HTTPS certificate: the configured PEM files, or
// a self-signed one kept in the data directory (a temporary directory
// with --memory, which writes nothing to the data directory).
func (a *App) certificate() (tls.Certificate, error) {
	o := a.opts
	if o.TLSCert != "" || o.TLSKey != "" {
		c, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return c, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		return c, nil
	}
	dir := o.DataDir
	if o.Memory {
		dir = filepath.Join(os.TempDir(), "omnibus-tls")
	}
	c, path, err := httpgw.LoadOrCreateCertificate(dir, nil)
	if err != nil {
		return c, fmt.Errorf("HTTPS certificate: %w", err)
	}
	a.CertPath = path
	a.log.Info("HTTPS uses a self-signed certificate; trust it in clients", zap.String("certificate", path))
	return c, nil
}

type amqpFront struct{ s *amqpserver.Server }

func (f amqpFront) shutdown(ctx context.Context) error { return f.s.Shutdown(ctx) }

type httpFront struct{ s *http.Server }

func (f httpFront) shutdown(ctx context.Context) error { return f.s.Shutdown(ctx) }
