package amqpserver

import (
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
)

// Session receivers (amqp.md §3.4).
const (
	sessionFilterKey  encoding.Symbol = "com.microsoft:session-filter"
	sessionFilterCode uint64          = 0x000000137000000C
	// ticksAtUnixEpoch is .NET's DateTime ticks (100 ns since 0001-01-01)
	// at 1970-01-01.
	ticksAtUnixEpoch = 621355968000000000
)

// sessionFilterValue is the session filter a receiver sent, kept so the
// attach reply can echo it in the client's own encoding: go-amqp only
// decodes a described value, rhea compares a plain string.
type sessionFilterValue struct {
	id         string // "" = next available session
	described  bool
	descriptor any
}

// sessionFilter finds the session filter in a source's filter set.
func sessionFilter(src *frames.Source) (sessionFilterValue, bool) {
	if src == nil {
		return sessionFilterValue{}, false
	}
	v, ok := src.Filter.GetSymbol(sessionFilterKey)
	if !ok {
		return sessionFilterValue{}, false
	}
	var f sessionFilterValue
	if d, ok := v.(encoding.Described); ok {
		f.described, f.descriptor = true, d.Descriptor
		v = d.Value
	}
	f.id, _ = v.(string)
	return f, true
}

// echo returns src with the session filter set to the granted id, in the
// form the client used.
func (f sessionFilterValue) echo(src *frames.Source, id string) *frames.Source {
	out := *src
	out.Filter = make(encoding.Map, 0, len(src.Filter))
	for _, kv := range src.Filter {
		if k, ok := kv.Key.(encoding.Symbol); ok && k == sessionFilterKey {
			var v any = id
			if f.described {
				v = encoding.Described{Descriptor: f.descriptor, Value: id}
			}
			kv.Value = v
		}
		out.Filter = append(out.Filter, kv)
	}
	return &out
}

// attachSessionReceiver accepts the session the filter names, or the next
// available one within the client's com.microsoft:timeout, in a helper
// goroutine, and then completes the attach with the session id and its
// lock expiry. Failures refuse the attach: com.microsoft:timeout when no
// session came, session-cannot-be-locked when another receiver holds it.
func (l *link) attachSessionReceiver(a *frames.Attach, f sessionFilterValue) {
	c := l.s.c
	wait := c.srv.cfg.SessionAcceptTimeout
	if v, ok := a.Properties.GetSymbol(propTimeout); ok {
		if ms, ok := asInt64(v); ok && ms >= 0 {
			wait = time.Duration(min(ms, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
		}
	}
	entity := l.entity
	c.goWork(func() {
		ctx, cancel := context.WithTimeout(c.ctx, wait)
		sl, err := c.broker().AcceptSession(ctx, entity, f.id)
		cancel()
		if err == nil && c.ctx.Err() != nil {
			err = c.ctx.Err()
		}
		posted := c.post(func() {
			if err != nil {
				if !l.detached && l.s.live() {
					l.refuse(a, amqpError(err))
				}
				return
			}
			if l.detached || !l.s.live() {
				c.closeSession(entity, sl)
				return
			}
			l.out.sess = sl
			c.srv.locks.put(c, entity, sl)
			l.watchSessionLock(sl)
			props := encoding.Map{{Key: propLockedTo, Value: dotnetTicks(sl.LockedUntil)}}
			reply := *a
			reply.Source = f.echo(a.Source, sl.SessionID)
			l.attach(&reply, props)
			l.pull()
		})
		if !posted && err == nil {
			c.closeSession(entity, sl)
		}
	})
}

// dotnetTicks converts t to .NET DateTime ticks (an AMQP long).
func dotnetTicks(t time.Time) int64 {
	return t.UnixMilli()*10000 + ticksAtUnixEpoch
}

// sessionRegistry maps entity path + session id to the session lock a
// receiver link of this server holds, and the connection that holds it,
// so that $management operations on sessions (renew-session-lock,
// get/set-session-state) find it for that connection only.
type sessionRegistry struct {
	mu sync.Mutex // guards m
	m  map[sessionKey]heldSession
}

// sessionKey names a session: its namespace, entity path (lower case)
// and session id.
type sessionKey struct {
	ns         *namespace.Namespace
	entity, id string
}

type heldSession struct {
	c  *conn
	sl *core.SessionLock
}

func (r *sessionRegistry) init() { r.m = make(map[sessionKey]heldSession) }

func (r *sessionRegistry) put(c *conn, entity string, sl *core.SessionLock) {
	r.mu.Lock()
	r.m[sessionKey{c.namespace(), strings.ToLower(entity), sl.SessionID}] = heldSession{c, sl}
	r.mu.Unlock()
}

// get returns the lock on session id of entity of namespace ns held by a
// receiver link of c, or of any connection when c is nil.
func (r *sessionRegistry) get(ns *namespace.Namespace, c *conn, entity, id string) *core.SessionLock {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.m[sessionKey{ns, strings.ToLower(entity), id}]
	if c != nil && h.c != c {
		return nil
	}
	return h.sl
}

// remove forgets sl if it is still the registered lock of its session.
func (r *sessionRegistry) remove(ns *namespace.Namespace, entity string, sl *core.SessionLock) {
	r.mu.Lock()
	k := sessionKey{ns, strings.ToLower(entity), sl.SessionID}
	if r.m[k].sl == sl {
		delete(r.m, k)
	}
	r.mu.Unlock()
}

// sessionLock returns the session lock a receiver link of any connection
// of this server holds on session id of the entity at path of the default
// namespace, or nil.
func (s *Server) sessionLock(entity, sessionID string) *core.SessionLock {
	return s.locks.get(s.reg.Default(), nil, entity, sessionID)
}

// closeSession releases a session lock held by a detached link.
func (c *conn) closeSession(entity string, sl *core.SessionLock) {
	c.srv.locks.remove(c.namespace(), entity, sl)
	if err := c.broker().CloseSession(entity, sl); err != nil {
		c.srv.log.Debug("closing message session", zap.String("entity", entity), zap.String("session", sl.SessionID), zap.Error(err))
	}
}
