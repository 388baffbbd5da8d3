package amqpserver

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/namespace"
)

// SASL mechanisms the server offers, ANONYMOUS first: the Service Bus SDKs
// use it (amqp.md §1.2), and clients pick the first one they support.
// MSSBCBS is Service Bus's own name for "a token follows on $cbs", which
// uamqp (Python's SDK, older .NET and Event Hubs clients) insists on.
const (
	mechAnonymous encoding.Symbol = "ANONYMOUS"
	mechPlain     encoding.Symbol = "PLAIN"
	mechMSSBCBS   encoding.Symbol = "MSSBCBS"
)

var saslMechanisms = []encoding.Symbol{mechAnonymous, mechPlain, mechMSSBCBS}

// authenticate applies a sasl-init to the connection's rights.
//
//   - ANONYMOUS, and MSSBCBS which means the same: any initial response;
//     the connection must then put a $cbs token before attaching to an
//     entity (decisions.md).
//   - PLAIN (RFC 4616, "authzid NUL authcid NUL passwd"): authcid is a
//     key name and passwd its key; the connection gets that rule's rights
//     on every entity the rule covers.
//
// The key name may pick the connection's namespace (namespace.go). Without
// a validator both succeed and the connection may do everything.
// Any other mechanism fails.
func (c *conn) authenticate(init *frames.SASLInit) error {
	if err := c.transportHosts(); err != nil {
		return err
	}
	if err := c.bindHost(init.Hostname, "the SASL hostname"); err != nil {
		return err
	}
	switch init.Mechanism {
	case mechAnonymous, mechMSSBCBS:
		if c.srv.authOff {
			c.auth.allowAll()
		}
		return nil
	case mechPlain:
		user, pass, err := parsePlain(init.InitialResponse)
		if err != nil {
			return err
		}
		if c.srv.authOff {
			c.auth.allowAll()
			return nil
		}
		ns, named, err := c.credentialNamespace(user, "")
		if err != nil {
			return err
		}
		if named || c.nsBound {
			if err := c.bindNamespace(ns, "the key name '"+user+"'"); err != nil {
				return err
			}
		} else {
			// Nothing has named a namespace yet: the key is checked in
			// the default one, and again in the namespace the open's
			// hostname names, if it names one (settlePlainLogin).
			c.plain = &plainLogin{ns: ns, user: user, pass: pass}
		}
		rule, err := ns.Authenticate(user, pass)
		if err != nil {
			return err
		}
		c.auth.login(rule, user, pass)
		return nil
	}
	return fmt.Errorf("amqpserver: unsupported SASL mechanism %q", init.Mechanism)
}

// plainLogin is a SASL PLAIN login checked in a namespace nothing named
// (the default one), kept until the open says which namespace the
// connection is for.
type plainLogin struct {
	ns         *namespace.Namespace
	user, pass string
}

// parsePlain splits a PLAIN initial response into authcid and passwd.
func parsePlain(p []byte) (user, pass string, err error) {
	parts := bytes.Split(p, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return "", "", errors.New("amqpserver: malformed SASL PLAIN response")
	}
	return string(parts[1]), string(parts[2]), nil
}
