package amqpserver

import (
	"errors"
	"strings"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// The $cbs put-token operation (amqp.md §2).
const (
	cbsOperation = "put-token"
	cbsStatusOK  = 202
)

// putToken handles a complete request delivered to $cbs: it settles the
// transfer (Go waits for that), validates the token for the audience,
// records the grant on the connection and replies on the reply link.
func (l *link) putToken(p *partial) {
	req, err := frames.UnmarshalMessage(p.buf)
	if err != nil {
		l.settleIncoming(p, &frames.Rejected{Error: errorf(frames.CondDecodeError, "%v", err)})
		return
	}
	l.acceptRequest(p)
	c := l.s.c
	status, desc := c.cbsPutToken(req)
	c.srv.stats.status(status)
	reply := &frames.Message{
		Properties: &frames.MessageProperties{},
		ApplicationProperties: encoding.Map{
			{Key: "status-code", Value: status},
			{Key: "status-description", Value: desc},
		},
	}
	if req.Properties != nil {
		reply.Properties.CorrelationID = req.Properties.MessageID
		reply.Properties.To = req.Properties.ReplyTo
	}
	c.routeReply(l.s, cbsAddress, req, reply)
}

// cbsPutToken validates a put-token request and returns the status code
// and description of the reply: 202 with the grant recorded, 400 for a
// malformed request, 401 when the token does not verify, 404 when it
// does but the audience names no entity, and 503 when it cannot be
// checked now (cbsRefusal). The first grant lifts the
// connection's pre-authentication limits; each re-arms the check of its
// links' grants (lifetime.go).
func (c *conn) cbsPutToken(req *frames.Message) (int32, string) {
	op, _ := appString(req, "operation")
	if op != cbsOperation {
		return 400, "The operation '" + op + "' is not supported by $cbs; use 'put-token'."
	}
	name, _ := appString(req, "name")
	token, ok := req.Value.(string)
	if !ok || name == "" {
		return 400, "A put-token request needs the token as an amqp-value string and the audience in 'name'."
	}
	path := audiencePath(name)
	entity := strings.TrimSuffix(path, "/$management")
	if c.srv.authOff {
		return c.cbsCheckEntity(entity)
	}
	// The token first: a peer without a valid one learns nothing about
	// which entities (or namespaces) exist.
	t, err := sas.Parse(token)
	if err != nil {
		return 401, description(err)
	}
	ns, _, err := c.credentialNamespace(t.KeyName, t.Host())
	if err != nil {
		return cbsRefusal(err)
	}
	if byName, ok := c.srv.reg.ForHost(namespace.HostOf(name)); ok && byName != ns {
		return 401, description(&sas.Error{Err: sas.ErrInvalidAudience,
			Detail: "The token is for namespace '" + ns.Name() + "', but the audience '" + name + "' names namespace '" + byName.Name() + "'."})
	}
	if c.nsBound && ns != c.namespace() {
		return 401, description(&sas.Error{Err: sas.ErrInvalidAudience,
			Detail: "The token is for namespace '" + ns.Name() + "', but this connection is to namespace '" + c.namespace().Name() + "'; open another connection for it."})
	}
	rights, err := ns.Validate(token, path, 0)
	if err != nil {
		return cbsRefusal(err)
	}
	expires := t.ExpiresAt().Add(ns.ClockSkew())
	if err := c.bindNamespace(ns, "the token"); err != nil {
		return 401, err.Error()
	}
	if e := c.countBound(); e != nil {
		return 403, e.Description // the connection is closed with it
	}
	if status, desc := c.cbsCheckEntity(entity); status != cbsStatusOK {
		return status, desc
	}
	first := !c.authenticated()
	c.auth.add(path, rights, expires)
	if first {
		c.credentialAccepted()
	}
	c.armLifetime()
	return cbsStatusOK, "Accepted"
}

// cbsRefusal is the status of a token that was not accepted: 401 when it
// does not verify; 503 (server busy) when it could not be checked
// because what holds the rules is out of reach now (a cluster's group or
// meta group without a reachable leader). The Azure SDKs treat a $cbs
// 401 or 404 as final and a 503 (or 500) as transient: azservicebus's
// GetRecoveryKind retries an RPCError of 408, 500 or 503; the JS SDK's
// core-amqp maps 503 to ServerBusyError, which it retries. 503 is what
// Service Bus answers when it is too busy to serve.
func cbsRefusal(err error) (int32, string) {
	if errors.Is(err, core.ErrServerBusy) {
		return 503, description(err)
	}
	return 401, description(err)
}

// cbsCheckEntity answers a put-token whose audience names an entity that
// does not exist with 404, and one whose entity cannot be looked up now
// (server busy: its cluster group has no reachable leader) with 503.
func (c *conn) cbsCheckEntity(entity string) (int32, string) {
	if entity != "" {
		if e := c.checkEntity(entity); e != nil {
			switch e.Condition {
			case frames.CondNotFound:
				return 404, e.Description
			case condServerBusy:
				return 503, e.Description
			}
			return 500, e.Description
		}
	}
	return cbsStatusOK, "Accepted"
}

// audiencePath reduces an audience ("amqp://host:5672/q1",
// "sb://host/t/Subscriptions/s/$management") to its normalised entity
// path: scheme and host dropped, like the SAS scope check does.
func audiencePath(aud string) string {
	if i := strings.IndexAny(aud, "?#"); i >= 0 {
		aud = aud[:i]
	}
	if i := strings.Index(aud, "://"); i >= 0 {
		aud = aud[i+len("://"):]
		_, aud, _ = strings.Cut(aud, "/")
	}
	return sas.NormalizePath(aud)
}

// appString returns the string (or symbol) application property k of m.
func appString(m *frames.Message, k string) (string, bool) {
	v, ok := m.ApplicationProperties.GetString(k)
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case encoding.Symbol:
		return string(x), true
	}
	return "", false
}
