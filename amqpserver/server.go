package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/gopool"
	"github.com/omnibusmq/omnibus/core/loglimit"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// ErrServerClosed is returned by [Server.Serve] and
// [Server.ListenAndServe] after [Server.Shutdown].
var ErrServerClosed = errors.New("amqpserver: Server closed")

// Defaults for the zero values of [Config].
const (
	DefaultIdleTimeout          = 120 * time.Second
	DefaultMaxFrameSize         = 65536
	DefaultMaxMessageSize       = 100 << 20
	DefaultSessionAcceptTimeout = 60 * time.Second
	DefaultSettleRetryFor       = 10 * time.Second
	defaultHandshakeTimeout     = 30 * time.Second
)

// Defaults of the connection-lifetime limits in [Config]. The cloud
// service's where it has one.
const (
	// DefaultMaxConnections is Service Bus's quota of concurrent AMQP
	// connections per namespace (Standard tier).
	DefaultMaxConnections = 5000
	// DefaultMaxPendingConnections bounds sockets still in the AMQP
	// handshake.
	DefaultMaxPendingConnections = 5000
	// DefaultAuthTimeout is how long Service Bus lets a connection go
	// without a valid token before it drops it.
	DefaultAuthTimeout = 20 * time.Second
	// DefaultPreAuthMaxFrameSize is the largest frame a connection may
	// send before it is authenticated.
	DefaultPreAuthMaxFrameSize = 16 << 10
	// DefaultPreAuthMaxLinks bounds the sessions, and the links, a
	// connection may hold before it is authenticated.
	DefaultPreAuthMaxLinks = 8
	// DefaultMaxCBSMessageSize caps a put-token request: a SAS token for
	// the longest entity path is under 2 KiB.
	DefaultMaxCBSMessageSize = 8 << 10
	// DefaultTokenCheckInterval is the longest a connection goes without
	// checking its tokens' expiry.
	DefaultTokenCheckInterval = time.Minute
)

// Config configures a [Server]. The zero value of every field but Broker
// means its default.
type Config struct {
	// Namespaces are the namespaces the server serves (core/namespace):
	// each connection reaches one, by the host it names (TLS server
	// name, SASL or open hostname, WebSocket Host) or by its first
	// credential's key name or audience, and the default one otherwise.
	// Nil: the one namespace of Broker, checked with Auth.
	Namespaces *namespace.Registry
	// Broker is the engine every link talks to when Namespaces is nil.
	Broker *core.Broker
	// Logger receives connection-level events; default zap.NewNop().
	// Everything at info level and above goes through LogLimiter.
	Logger *zap.Logger
	// LogLimiter bounds the lines peers can make the server log: each
	// connection is a scope of its own (loglimit.Limiter.Scope). Share
	// one with the other front so the bound is the process's; nil means a
	// limiter of the server's own with loglimit's defaults.
	LogLimiter *loglimit.Limiter
	// Auth validates SASL PLAIN logins and $cbs tokens when Namespaces is
	// nil (each namespace has its rules otherwise). Nil then disables
	// authentication: every connection may do everything (a development
	// mode; the emulator always has keys).
	Auth *sas.Validator
	// MaxConnections caps concurrent connections past the handshake
	// (open exchanged); 0 means [DefaultMaxConnections], a negative value
	// no cap. Checked at accept: a peer over the cap gets the handshake,
	// then a close with amqp:resource-limit-exceeded.
	MaxConnections int
	// MaxPendingConnections caps sockets accepted but not yet through
	// the handshake; 0 means [DefaultMaxPendingConnections], a negative
	// value no cap. Checked at accept, answered like MaxConnections.
	MaxPendingConnections int
	// Admit, when set, is asked about every accepted peer before anything
	// is read from it. A non-nil error refuses the peer: it gets the
	// handshake, then a close with amqp:unauthorized-access whose
	// description is the error's text (protected mode uses it); the
	// refusal is logged at debug level. Admit runs on the accept loop,
	// so it must be quick.
	Admit func(remote net.Addr) error
	// CheckOrigin, when set, is asked about the Origin of every WebSocket
	// upgrade that has one, unless it is the request's own (scheme, host
	// and port of the URL dialled): a non-nil error refuses the upgrade
	// with 403 and that error's text. Browsers send the page's origin;
	// other clients send none, or (the Python SDK's sync WebSocket
	// transport) the URL they dial. Unset, every origin is accepted, as
	// Service Bus does.
	CheckOrigin func(origin string) error
	// AuthTimeout is how long, from accept, a connection may go without
	// a credential: a SASL PLAIN login or a valid $cbs token. A
	// connection without one by then is closed with
	// amqp:unauthorized-access (as Service Bus does after 20 s). 0 means
	// [DefaultAuthTimeout]. Without Auth there is no such deadline.
	AuthTimeout time.Duration
	// PreAuthMaxFrameSize is the largest frame accepted before the
	// connection is authenticated (SASL frames, open, and everything up
	// to the first valid token); a larger one closes the connection with
	// amqp:frame-size-too-small. 0 means [DefaultPreAuthMaxFrameSize].
	PreAuthMaxFrameSize uint32
	// PreAuthMaxLinks bounds the sessions, and separately the links and
	// the declared transactions, a connection may hold before it is
	// authenticated. 0 means
	// [DefaultPreAuthMaxLinks].
	PreAuthMaxLinks int
	// MaxCBSMessageSize caps a put-token request on $cbs; a larger one is
	// rejected with amqp:link:message-size-exceeded and its bytes are
	// not kept. 0 means [DefaultMaxCBSMessageSize].
	MaxCBSMessageSize uint64
	// TokenCheckInterval is the longest a connection holding $cbs grants
	// goes between checks of their expiry. The check also runs when the
	// earliest grant lapses, so this only bounds how long a change of the
	// clock (Now) goes unseen. 0 means [DefaultTokenCheckInterval].
	TokenCheckInterval time.Duration
	// IdleTimeout is the idle-time-out the server advertises in its open:
	// a peer silent for longer is disconnected. Default
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// MaxFrameSize is the max-frame-size the server advertises; values
	// below 512 are raised to 512. Default [DefaultMaxFrameSize].
	MaxFrameSize uint32
	// MaxMessageSize caps an incoming message (all frames of one
	// delivery) whatever the entity allows. Default
	// [DefaultMaxMessageSize] (100 MB, the Premium limit).
	MaxMessageSize uint64
	// SessionAcceptTimeout bounds the wait for the next available
	// session when the client gives no com.microsoft:timeout. Default
	// [DefaultSessionAcceptTimeout].
	SessionAcceptTimeout time.Duration
	// SettleRetryFor is how long a settlement the broker refused for a
	// passing reason (server busy, an outcome unknown) is retried before
	// its client is told the message's lock is lost (settleretry.go).
	// Default [DefaultSettleRetryFor].
	SettleRetryFor time.Duration
	// Now returns the current time for token expiry; default time.Now.
	Now func() time.Time
	// Limits bounds what one open connection can make the server hold
	// (limits.go).
	Limits Limits
	// Memory is the process's memory budget, shared with the HTTP
	// gateway: the bytes of incoming deliveries, of messages taken for
	// delivery, of open transactions and of $management replies are taken
	// from it, and work that would go past it is refused with
	// com.microsoft:server-busy. Nil: only Limits bound them.
	Memory *membudget.Budget
}

func (c *Config) validate() error {
	if c.Namespaces == nil {
		if c.Broker == nil {
			return errors.New("amqpserver: Config.Namespaces or Config.Broker is required")
		}
		c.Namespaces = namespace.Single(c.Broker.Namespace(), c.Broker, c.Auth)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.LogLimiter == nil {
		c.LogLimiter = loglimit.New(loglimit.Config{})
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxPendingConnections == 0 {
		c.MaxPendingConnections = DefaultMaxPendingConnections
	}
	if c.AuthTimeout < 0 || c.TokenCheckInterval < 0 || c.PreAuthMaxLinks < 0 {
		return errors.New("amqpserver: Config.AuthTimeout, TokenCheckInterval and PreAuthMaxLinks must not be negative")
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.TokenCheckInterval == 0 {
		c.TokenCheckInterval = DefaultTokenCheckInterval
	}
	if c.PreAuthMaxLinks == 0 {
		c.PreAuthMaxLinks = DefaultPreAuthMaxLinks
	}
	if c.MaxCBSMessageSize == 0 {
		c.MaxCBSMessageSize = DefaultMaxCBSMessageSize
	}
	if c.IdleTimeout < 0 {
		return errors.New("amqpserver: Config.IdleTimeout is negative")
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	c.MaxFrameSize = max(c.MaxFrameSize, 512)
	if c.PreAuthMaxFrameSize == 0 {
		c.PreAuthMaxFrameSize = DefaultPreAuthMaxFrameSize
	}
	c.PreAuthMaxFrameSize = min(max(c.PreAuthMaxFrameSize, 512), c.MaxFrameSize)
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.SessionAcceptTimeout <= 0 {
		c.SessionAcceptTimeout = DefaultSessionAcceptTimeout
	}
	if c.SettleRetryFor <= 0 {
		c.SettleRetryFor = DefaultSettleRetryFor
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c.Limits.setDefaults()
}

// Server is an AMQP 1.0 listener speaking the Service Bus dialect: SASL
// ANONYMOUS with $cbs tokens or PLAIN with a key, entity links that send
// to and receive from the broker, session receivers, and the $management
// request/response node.
type Server struct {
	cfg     Config
	log     *zap.Logger // the server's own lines (accept, admission), limited as one scope
	reg     *namespace.Registry
	authOff bool // the one namespace checks no credentials (Config.Auth nil)
	locks   sessionRegistry
	jms     jmsRegistry // JMS consumers' subscriptions (jms.go)
	stats   serverStats // connections and requests, for metrics (stats.go)

	// quit is closed when Shutdown starts: listeners stop accepting.
	quit chan struct{}
	// ctx is cancelled by Shutdown; every connection derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // connection goroutines
	// helpers runs the connections' helper goroutines (conn.goWork).
	helpers *gopool.Pool

	mu struct {
		sync.Mutex // guards the fields below
		listeners  map[net.Listener]*listenerState
		lost       []error // why listeners stopped other than by Shutdown
		conns      map[*conn]struct{}
		pending    int                   // conns still in the handshake
		open       int                   // conns past it
		refusing   map[net.Conn]struct{} // refusals being answered (see refuse)
		refused    int                   // refusals not logged yet
		refusedLog time.Time
		addr       net.Addr
		closed     bool

		// nsConns counts the open connections bound to each namespace
		// (namespace.go), against its MaxConnections.
		nsConns map[*namespace.Namespace]int
	}
}

// New checks cfg and returns a Server ready to [Server.Serve].
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.LogLimiter.Scope(cfg.Logger), reg: cfg.Namespaces,
		authOff: cfg.Namespaces.Default().AuthDisabled(), helpers: gopool.New(maxIdleHelpers), quit: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]*listenerState)
	s.mu.conns = make(map[*conn]struct{})
	s.mu.nsConns = make(map[*namespace.Namespace]int)
	s.mu.refusing = make(map[net.Conn]struct{})
	s.locks.init()
	cfg.Namespaces.OnDelete(s.namespaceDeleted)
	return s, nil
}

// ListenAndServe listens on the TCP address addr (":5672" when empty) and
// serves it.
func (s *Server) ListenAndServe(addr string) error {
	if addr == "" {
		addr = ":5672"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(l)
}

// Serve accepts connections on l until [Server.Shutdown] and serves each
// in its own goroutine. A failed accept (EMFILE or ENFILE when the process
// is out of descriptors, or any other error but the listener's closing) is
// logged, rate-limited, and retried after a back-off that grows from 5 ms
// to 1 s, as net/http does; [Server.Health] reports the listener as
// failing meanwhile. Serve always returns a non-nil error and closes l;
// after Shutdown the error is [ErrServerClosed].
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.listeners[l] = &listenerState{addr: l.Addr()}
	if s.mu.addr == nil {
		s.mu.addr = l.Addr()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()

	for {
		nc, err := l.Accept()
		if err != nil {
			if s.shuttingDown() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				s.mu.Lock()
				s.mu.lost = append(s.mu.lost, fmt.Errorf("AMQP listener %s stopped: %w", l.Addr(), err))
				s.mu.Unlock()
				return err
			}
			if !s.acceptFailed(l, err) {
				return ErrServerClosed
			}
			continue
		}
		s.accepted(l)
		if !s.admit(nc) {
			return ErrServerClosed
		}
	}
}

// shuttingDown reports whether Shutdown has started.
func (s *Server) shuttingDown() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// Addr returns the address of the first listener being served, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.addr
}

// Shutdown stops accepting and drains every connection (drain.go): it
// stops reading, answers every transfer and settlement it had already
// taken (once durable, as always), then closes with
// amqp:connection:forced. Sockets still in the handshake are closed at
// once: nothing was taken from them. Shutdown waits for the connections
// until ctx is done; then it cuts the remaining ones (sends already
// handed to the broker still finish) and returns ctx.Err().
func (s *Server) Shutdown(ctx context.Context) error {
	defer s.helpers.Close() // helpers still running may finish; none waits idle
	s.mu.Lock()
	if !s.mu.closed {
		close(s.quit)
	}
	s.mu.closed = true
	for l := range s.mu.listeners {
		l.Close()
	}
	for nc := range s.mu.refusing {
		nc.SetDeadline(time.Now()) // a refusal has nothing to finish
	}
	for c := range s.mu.conns {
		if !c.opened {
			c.nc.Close()
		}
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		// Cut the remaining connections hard.
		s.cancel()
		s.mu.Lock()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// host is the default namespace's host, used in Service Bus style
// descriptions before a connection has a namespace.
func (s *Server) host() string {
	return s.reg.Default().Name()
}
