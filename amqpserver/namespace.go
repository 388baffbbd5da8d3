package amqpserver

import (
	"crypto/tls"
	"fmt"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
)

// Namespaces. A connection serves one namespace (core/namespace). It
// starts on the default one, unbound; the first of these to name a
// namespace binds it there for good:
//
//   - the host it connects to: the TLS server name, the WebSocket
//     upgrade's Host, the sasl-init hostname, the open's hostname (a
//     name whose first label is a namespace's: sales.localhost);
//   - its first credential: the key name of a SASL PLAIN login or of
//     the first token put on $cbs ("rule@sales", "sales", a rule only
//     sales has), or that token's audience host.
//
// A credential or a link binds the connection to the namespace it is on
// even when nothing named one, so that a grant can never be carried into
// another namespace: a later token or host naming another namespace is
// refused (401 on $cbs; a SASL failure; amqp:unauthorized-access on the
// open).

// namespace returns the connection's namespace.
func (c *conn) namespace() *namespace.Namespace { return c.ns.Load() }

// broker returns the broker of the connection's namespace.
func (c *conn) broker() *core.Broker { return c.ns.Load().Broker() }

// bindNamespace binds the connection to ns. Owned by serve, then run.
func (c *conn) bindNamespace(ns *namespace.Namespace, by string) error {
	if cur := c.ns.Load(); c.nsBound && cur != ns {
		return fmt.Errorf("the connection is to namespace '%s', but %s names namespace '%s'; "+
			"open another connection for it", cur.Name(), by, ns.Name())
	}
	if !c.nsBound && ns != c.ns.Load() {
		c.log.Debug("connection reaches namespace", zap.String("namespace", ns.Name()), zap.String("by", by))
	}
	c.ns.Store(ns)
	c.nsBound = true
	return nil
}

// bindHost binds the connection to the namespace host names, if it names
// one.
func (c *conn) bindHost(host, what string) error {
	if host == "" {
		return nil
	}
	if ns, ok := c.srv.reg.ForHost(host); ok {
		return c.bindNamespace(ns, what+" '"+host+"'")
	}
	return nil
}

// transportHosts are the host names the transport carried before AMQP:
// the TLS server name, the WebSocket upgrade's Host.
func (c *conn) transportHosts() error {
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := c.bindHost(tc.ConnectionState().ServerName, "the TLS server name"); err != nil {
			return err
		}
	}
	if h, ok := c.nc.(interface{ Host() string }); ok {
		return c.bindHost(h.Host(), "the WebSocket Host")
	}
	return nil
}

// credentialNamespace returns the namespace a credential's key name (and
// a token's audience host, "" for none) names, or the connection's when
// they name none (namespace.Registry.Resolve), and whether they named
// one.
func (c *conn) credentialNamespace(keyName, host string) (*namespace.Namespace, bool, error) {
	ns, named, err := c.srv.reg.Resolve("", keyName, host)
	if err != nil || !named {
		return c.namespace(), false, err
	}
	return ns, true, nil
}

// settlePlainLogin ends a provisional SASL PLAIN login (sasl.go) once the
// open has been read: when the open's hostname named another namespace
// than the one the key was checked in, the key is checked again there,
// and the connection is bound either way.
func (c *conn) settlePlainLogin() error {
	p := c.plain
	c.plain = nil
	if p == nil {
		return nil
	}
	if ns := c.namespace(); ns != p.ns {
		rule, err := ns.Authenticate(p.user, p.pass)
		if err != nil {
			return fmt.Errorf("the SASL PLAIN key is not one of namespace '%s', which the open's hostname names: %w", ns.Name(), err)
		}
		c.auth.login(rule, p.user, p.pass)
	}
	c.nsBound = true
	return nil
}

// namespaceDeleted ends what the server's connections hold in a deleted
// namespace: every link to one of its entities is detached with
// amqp:not-found. The connections stay open; their namespace is gone, so
// new attaches find nothing either.
func (s *Server) namespaceDeleted(ns *namespace.Namespace) {
	s.mu.Lock()
	var conns []*conn
	for c := range s.mu.conns {
		if c.namespace() == ns {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.post(func() {
			for _, ss := range c.local {
				for _, l := range ss.links {
					if l.kind != nodeCBS && l.attached && !l.detached {
						l.detach(errorf(frames.CondNotFound,
							"The messaging entity 'sb://%s/%s' could not be found: its namespace was deleted.", ns.Name(), l.entity))
					}
				}
			}
		})
	}
}

// deleted reports whether the connection's namespace has been deleted.
func (c *conn) nsDeleted() bool {
	select {
	case <-c.namespace().Deleted():
		return true
	default:
		return false
	}
}

// Connections per namespace. A connection counts against its namespace's
// MaxConnections (namespace.Limits) from the moment it is open and bound
// to it, by whichever comes last: the open (when the host, the TLS
// server name or a SASL PLAIN login bound it), or its first $cbs token.
// A connection past the cap is closed with amqp:resource-limit-exceeded
// and Service Bus's ConnectionsQuotaExceeded; the other namespaces'
// connections are not affected. Connections not yet bound (an anonymous
// one before its first token) count only against the server's
// MaxConnections, and their authentication deadline bounds them.

// countInNamespaceLocked counts c against ns, or returns the error to
// close c with when ns holds its MaxConnections already. s.mu is held.
func (s *Server) countInNamespaceLocked(c *conn, ns *namespace.Namespace) *frames.Error {
	if c.nsCounted != nil {
		return nil
	}
	if max := ns.Limits().MaxConnections; max > 0 && s.mu.nsConns[ns] >= max {
		return errorf(frames.CondResourceLimitExceeded,
			"ConnectionsQuotaExceeded for namespace %s. The namespace's limit of %d concurrent connections is reached.", ns.Name(), max)
	}
	s.mu.nsConns[ns]++
	c.nsCounted = ns
	return nil
}

// uncountLocked takes an ended connection out of its namespace's count.
// s.mu is held.
func (s *Server) uncountLocked(c *conn) {
	ns := c.nsCounted
	if ns == nil {
		return
	}
	c.nsCounted = nil
	if s.mu.nsConns[ns]--; s.mu.nsConns[ns] <= 0 {
		delete(s.mu.nsConns, ns)
	}
}

// countBound counts an open connection that has just been bound to its
// namespace by a $cbs token against that namespace, and closes it when
// the namespace is at its MaxConnections (the error it returns). Called
// by run. (A link binds a connection without a token only when the
// server checks no credentials: a registry of one namespace without
// limits.)
func (c *conn) countBound() *frames.Error {
	if c.nsCounted != nil || !c.nsBound || !c.opened {
		return nil
	}
	c.srv.mu.Lock()
	e := c.srv.countInNamespaceLocked(c, c.namespace())
	c.srv.mu.Unlock()
	if e != nil {
		c.log.Info("connection refused: its namespace is at its connection limit", zap.String("namespace", c.namespace().Name()))
		c.write(0, &frames.Close{Error: e})
		c.closed = true
	}
	return e
}

// NamespaceConnections returns how many open connections count against
// ns's MaxConnections now.
func (s *Server) NamespaceConnections(ns *namespace.Namespace) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.nsConns[ns]
}
