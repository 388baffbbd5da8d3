package amqpserver

import (
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/sas"
)

// A connection's life is bounded by its credentials (amqp.md §2.5, as
// Service Bus does it):
//
//   - From accept, a connection has Config.AuthTimeout (20 s) to present
//     one: a SASL PLAIN login, or a valid put-token on $cbs after SASL
//     ANONYMOUS. Until then it may send only small frames
//     (PreAuthMaxFrameSize), hold only a few sessions and links
//     (PreAuthMaxLinks), and attach only to $cbs; past the deadline it is
//     closed with amqp:unauthorized-access.
//   - A link attached on the strength of $cbs grants is detached with
//     amqp:unauthorized-access once the connection no longer holds the
//     rights it needs: its token lapsed and no newer token for the entity
//     (or a path above it) replaced it. A token renewed before it lapses
//     (the SDKs renew minutes ahead) keeps its links.
//
// One timer in run serves both: it fires at the deadline while the
// connection is unauthenticated, and at the earliest grant expiry (at
// most TokenCheckInterval ahead) while links depend on grants.

// authenticated reports whether the connection has presented a credential;
// once it has, its pre-authentication limits are lifted for good.
func (c *conn) authenticated() bool { return c.auth.authenticated() }

// credentialAccepted lifts the pre-authentication limits after a SASL
// login or the first valid token: frames up to MaxFrameSize (the reader
// checks the new limit from the next frame header on) and no deadline.
func (c *conn) credentialAccepted() {
	c.rd.SetMaxFrameSize(c.srv.cfg.MaxFrameSize)
	c.authDeadline = time.Time{}
}

// startLifetime creates the connection's lifetime timer and arms it.
func (c *conn) startLifetime() {
	c.lifeTimer = time.NewTimer(time.Hour)
	c.lifeTimer.Stop()
	c.armLifetime()
}

// armLifetime sets the lifetime timer to the next moment something may
// lapse: the authentication deadline, or the earliest expiry of a grant
// while links depend on grants. It stops the timer when nothing can.
func (c *conn) armLifetime() {
	var wait time.Duration
	switch {
	case !c.authDeadline.IsZero():
		wait = time.Until(c.authDeadline)
	case c.grantLinks():
		wait = c.srv.cfg.TokenCheckInterval
		if exp, ok := c.auth.nextExpiry(); ok {
			wait = min(wait, exp.Sub(c.srv.cfg.Now()))
		}
	default:
		c.lifeTimer.Stop()
		c.lifeArmed = false
		return
	}
	c.lifeTimer.Reset(max(wait, time.Millisecond))
	c.lifeArmed = true
}

// lifetimeCheck runs when the lifetime timer fires: it closes a
// connection past its authentication deadline and detaches links whose
// grants lapsed, then re-arms the timer.
func (c *conn) lifetimeCheck() error {
	c.lifeArmed = false
	if !c.authDeadline.IsZero() && !time.Now().Before(c.authDeadline) {
		c.log.Debug("no credential within the authentication timeout", zap.Duration("timeout", c.srv.cfg.AuthTimeout))
		return closeWith(frames.CondUnauthorizedAccess,
			"No valid token was put on $cbs within %v of connecting.", c.srv.cfg.AuthTimeout)
	}
	keyName, key := c.auth.plainCredential()
	if keyName != "" {
		// A rule changed since the login (a key rotated, rights taken
		// away) ends what the login no longer allows.
		rule, err := c.namespace().Authenticate(keyName, key)
		c.auth.relogin(rule, err == nil)
	}
	for _, s := range c.local {
		if !s.live() {
			continue
		}
		for _, l := range s.links {
			if l.attached && !l.detached && !c.holds(l) {
				c.log.Debug("credential lapsed; detaching link", zap.String("link", l.name), zap.String("address", l.address))
				if keyName != "" {
					l.detach(errorf(frames.CondUnauthorizedAccess,
						"Unauthorized access. The key '%s' this connection logged in with no longer grants what '%s' needs: its rule changed.", keyName, l.address))
				} else {
					l.detach(errorf(frames.CondUnauthorizedAccess,
						"Unauthorized access. The token for '%s' has expired; put a new token on $cbs before it does.", l.address))
				}
			}
		}
	}
	c.armLifetime()
	return nil
}

// holds reports whether the connection still has the rights link l was
// attached with.
func (c *conn) holds(l *link) bool {
	switch {
	case l.need == 0:
		return true // $cbs, or a server without a validator
	case l.needAny:
		return c.auth.allowsAny(l.address, l.need)
	default:
		return c.auth.allows(l.entity, l.need)
	}
}

// grantLinks reports whether some live link of the connection may lose
// its rights when a grant lapses. Connections authenticated by SASL
// PLAIN or without a validator have none.
func (c *conn) grantLinks() bool {
	if !c.auth.usesGrants() {
		return false
	}
	for _, s := range c.local {
		for _, l := range s.links {
			if l.need != 0 && !l.detached {
				return true
			}
		}
	}
	return false
}

// authorizeAttach checks that the connection may attach link l, before
// anything about the node is looked up, so a peer without rights learns
// nothing about which entities exist. $cbs is open to every connection;
// an entity link needs Send (the client sends) or Listen (it receives),
// an <entity>/$management link any right on the entity. It records on
// l the rights the link keeps needing (see lifetimeCheck).
func (c *conn) authorizeAttach(l *link) *frames.Error {
	if !c.authenticated() && c.liveLinks() > c.srv.cfg.PreAuthMaxLinks { // l included
		return errorf(frames.CondResourceLimitExceeded,
			"A connection may hold at most %d links before it puts a valid token on $cbs.", c.srv.cfg.PreAuthMaxLinks)
	}
	switch l.kind {
	case nodeCBS:
		return nil
	case nodeManagement:
		if !c.auth.allowsAny(l.address, sas.Manage|sas.Send|sas.Listen) {
			return errorf(frames.CondUnauthorizedAccess, "Unauthorized access to '%s'. Put a token on $cbs first.", l.address)
		}
		l.need, l.needAny = sas.Manage|sas.Send|sas.Listen, true
		c.nsBound = true // a link is on the connection's namespace for good
	default:
		need := sas.Send
		if l.out != nil {
			need = sas.Listen
		}
		if !c.auth.allows(l.entity, need) {
			return errorf(frames.CondUnauthorizedAccess,
				"Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: '%s'.", need, l.entity)
		}
		l.need = need
		c.nsBound = true
	}
	if !c.lifeArmed && c.auth.usesGrants() {
		c.armLifetime() // an armed timer fires in time: each put-token re-arms it
	}
	return nil
}

// liveLinks counts the links of the connection not detached.
func (c *conn) liveLinks() int {
	n := 0
	for _, s := range c.local {
		for _, l := range s.links {
			if !l.detached {
				n++
			}
		}
	}
	return n
}

// admitSession refuses a begin beyond PreAuthMaxLinks sessions while the
// connection is not authenticated.
func (c *conn) admitSession() error {
	if c.authenticated() || len(c.sessions) < c.srv.cfg.PreAuthMaxLinks {
		return nil
	}
	return closeWith(frames.CondResourceLimitExceeded,
		"A connection may hold at most %d sessions before it puts a valid token on $cbs.", c.srv.cfg.PreAuthMaxLinks)
}
