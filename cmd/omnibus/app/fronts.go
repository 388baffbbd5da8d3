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
)

// startFronts starts the AMQP listener and the HTTP(S) gateway on the
// configured addresses. Listening happens here, synchronously, so a port
// in use is reported by Start and the addresses are known on return.
func (a *App) startFronts() error {
	o := a.opts
	if !disabled(o.AMQPAddr) {
		srv, err := amqpserver.New(amqpserver.Config{Broker: a.Broker, Logger: o.Logger.Named("amqp"),
			Auth: a.Auth, MaxConnections: o.MaxConnections, MaxPendingConnections: o.MaxPendingConnections,
			AuthTimeout: o.AuthTimeout, Limits: o.AMQPLimits})
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", o.AMQPAddr)
		if err != nil {
			return fmt.Errorf("AMQP listener: %w", err)
		}
		a.amqpAddr = l.Addr()
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
	gw, err := httpgw.New(httpgw.Config{Broker: a.Broker, Logger: o.Logger.Named("http"), Auth: a.Auth, Namespace: a.Namespace})
	if err != nil {
		return err
	}
	if !disabled(o.HTTPAddr) {
		addr, err := a.serveHTTP(gw, o.HTTPAddr, nil)
		if err != nil {
			return fmt.Errorf("HTTP listener: %w", err)
		}
		a.httpAddr = addr
	}
	if !disabled(o.HTTPSAddr) {
		cert, err := a.certificate()
		if err != nil {
			return err
		}
		addr, err := a.serveHTTP(gw, o.HTTPSAddr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		if err != nil {
			return fmt.Errorf("HTTPS listener: %w", err)
		}
		a.httpsAddr = addr
	}
	return nil
}

func (a *App) serveHTTP(gw *httpgw.Gateway, addr string, tlsConf *tls.Config) (net.Addr, error) {
	srv := gw.Server(addr)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		srv.TLSConfig = tlsConf
		l = tls.NewListener(l, tlsConf)
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("HTTP server stopped", zap.Error(err))
		}
	}()
	a.fronts = append(a.fronts, httpFront{srv})
	return l.Addr(), nil
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
