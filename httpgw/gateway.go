package httpgw

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/loglimit"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw/console"
)

// Default credentials, the Service Bus emulator's (decisions.md): used
// when [Config.Auth] is nil.
const (
	DefaultKeyName = "RootManageSharedAccessKey"
	DefaultKey     = "SAS_KEY_VALUE"
)

// MaxHeaderBytes is the request header limit servers running the gateway
// should set ([http.Server.MaxHeaderBytes]): custom properties may take
// 64 KiB (rest.md §6), plus room for the standard headers and the token.
const MaxHeaderBytes = 96 << 10

// Config configures a [Gateway]. The zero value of every field but Broker
// means its default.
type Config struct {
	// Namespaces are the namespaces the gateway serves
	// (core/namespace): a request reaches one by its Host, or by its
	// token's key name or audience, and the default one otherwise. Nil:
	// the one namespace of Broker, checked with Auth.
	Namespaces *namespace.Registry
	// Broker is the engine requests are translated into when Namespaces
	// is nil.
	Broker *core.Broker
	// Logger receives request failures and, at debug level, every request.
	// Default: zap.NewNop(). Everything at info level and above goes
	// through LogLimiter.
	Logger *zap.Logger
	// LogLimiter bounds the lines clients can make the gateway log; the
	// gateway (console included) is one scope of it
	// (loglimit.Limiter.Scope). Share one with the other front so the
	// bound is the process's; nil means a limiter of the gateway's own
	// with loglimit's defaults.
	LogLimiter *loglimit.Limiter
	// Memory is the process's memory budget, shared with the AMQP front:
	// request bodies, received messages being written and console pages
	// are taken from it, and a request it has no room for is answered
	// 503 with Retry-After. Nil: only the per-request limits bound them.
	Memory *membudget.Budget
	// Auth checks SAS tokens when Namespaces is nil. Default: a validator
	// holding the emulator's RootManageSharedAccessKey / SAS_KEY_VALUE
	// rule with Manage rights.
	Auth *sas.Validator
	// Namespace is the name of the namespace of Broker when Namespaces is
	// nil. Default: the broker's namespace.
	Namespace string
	// StrictProperties rejects custom property headers whose unquoted value
	// is neither a boolean nor a number, as the REST docs describe
	// (rest.md §2.3). By default such values are kept as strings, because
	// the docs' own send example uses them.
	StrictProperties bool

	// ReadTimeout bounds the reading of a whole request, headers and body:
	// a body trickled slower is cut off. Default [DefaultReadTimeout].
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of a response. A long poll
	// (…/messages/head?timeout=N) gets its wait added. Default
	// [DefaultWriteTimeout].
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has sent no request
	// for this long. Default [DefaultIdleTimeout].
	IdleTimeout time.Duration
	// MaxConnections caps the connections open at once over every listener
	// made by [Gateway.Listener]; see that method for what happens at the
	// cap. Default [DefaultMaxConnections]; negative means unlimited.
	MaxConnections int
	// Admit, when set, is asked about every request's peer before anything
	// else: a non-nil error refuses the request with 403 and that error's
	// text, and closes the connection (protected mode).
	Admit func(remote net.Addr) error
	// CheckHost, when set, is asked about every request's Host (as sent,
	// port included) after Admit: a non-nil error refuses the request with
	// 421 Misdirected Request and that error's text, and closes the
	// connection. It keeps out a page whose name was made to resolve to
	// the server (DNS rebinding): the browser then sends that name.
	CheckHost func(host string) error
	// Components are what GET /health reports on besides the gateway
	// itself: listeners, the store. None: /health answers healthy while the
	// gateway serves.
	Components []Component
	// WebSocket, when set, serves AMQP over WebSockets at
	// /$servicebus/websocket (and with a trailing slash), where the SDKs
	// open it; it is amqpserver's handler, which upgrades the request.
	// Without it that path answers 404, and so does an upgrade to any
	// other path in any case.
	WebSocket http.Handler
}

// Defaults for the zero values of [Config]'s limits.
const (
	DefaultReadTimeout    = 60 * time.Second
	DefaultWriteTimeout   = 60 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultMaxConnections = 10000
	// headerTimeout bounds the reading of request headers (less when
	// ReadTimeout is shorter).
	headerTimeout = 20 * time.Second
)

func (c *Config) validate() error {
	if c.Namespaces == nil && c.Broker == nil {
		return errors.New("httpgw: Config.Namespaces or Config.Broker is required")
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.LogLimiter == nil {
		c.LogLimiter = loglimit.New(loglimit.Config{})
	}
	if c.Namespaces == nil && c.Auth == nil {
		v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{
			KeyName: DefaultKeyName, Key: DefaultKey, Rights: sas.Manage,
		}}})
		if err != nil {
			return err
		}
		c.Auth = v
	}
	if c.Namespaces == nil {
		if c.Namespace == "" {
			c.Namespace = c.Broker.Namespace()
		}
		c.Namespaces = namespace.Single(c.Namespace, c.Broker, c.Auth)
	}
	if c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 {
		return errors.New("httpgw: negative timeout in Config")
	}
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	for _, comp := range c.Components {
		if comp.Name == "" || comp.Health == nil {
			return errors.New("httpgw: a health Component needs a Name and a Health func")
		}
	}
	return nil
}

// Gateway serves the Service Bus REST and ATOM management APIs over a
// [core.Broker]. It is safe for concurrent use.
type Gateway struct {
	cfg     Config
	reg     *namespace.Registry
	log     *zap.Logger // limited: one scope of Config.LogLimiter
	handler http.Handler
	started time.Time // reported as the namespace's creation time
	conns   *connLimiter
	stats   gatewayStats // connections and requests, for metrics (stats.go)
	// stopping is cancelled when a server of the gateway begins its
	// Shutdown: long polls then end at once instead of holding it up.
	stopping context.Context
	stop     context.CancelFunc
}

// New checks cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.LogLimiter.Scope(cfg.Logger)
	g := &Gateway{cfg: cfg, reg: cfg.Namespaces, log: log, conns: newConnLimiter(cfg.MaxConnections, log)}
	g.started = g.now()
	g.stopping, g.stop = context.WithCancel(context.Background())
	web, err := console.New(console.Config{Namespaces: cfg.Namespaces, Logger: log, Memory: cfg.Memory})
	if err != nil {
		return nil, err
	}
	g.handler = g.middleware(withConsole(web, g.routes()))
	return g, nil
}

// Handler returns the gateway's HTTP handler: every route, behind the
// logging, recovery and path-normalising middleware.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Server returns an [http.Server] for the gateway on addr with the limits
// the gateway expects: header size, read, write and idle timeouts, and the
// connection accounting of [Gateway.Listener]. Its Shutdown ends the
// gateway's long polls at once (204, as if the wait had ended empty), so
// they do not hold the shutdown up. Serve it on a listener from
// [Gateway.Listener], which also does TLS; ListenAndServe skips the
// connection cap.
func (g *Gateway) Server(addr string) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           g.handler,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: min(headerTimeout, g.cfg.ReadTimeout),
		ReadTimeout:       g.cfg.ReadTimeout,
		WriteTimeout:      g.cfg.WriteTimeout,
		IdleTimeout:       g.cfg.IdleTimeout,
		ConnState:         g.connState,
		ErrorLog:          serverErrorLog(g.log),
	}
	srv.RegisterOnShutdown(g.stop)
	return srv
}

// Reserved path segments, matched case-insensitively (rest.md §1.1: SDKs
// send both "Messages/Head" and "messages/head", "Subscriptions" and
// "subscriptions"). Each is a mux variable with a non-capturing pattern.
const (
	segMessages = "{_messages:(?i:messages)}"
	segHead     = "{_head:(?i:head)}"
	segSubs     = "{_subs:(?i:subscriptions)}"
	segRules    = "{_rules:(?i:rules)}"
	segRes      = "{_res:(?i:\\$resources)}"
	segKind     = "{kind:(?i:queues|topics)}"
	entityVar   = "{entity:.+}"
	topicVar    = "{topic:.+}"
)

// withConsole serves the web console (package console) in front of the
// routes: its page, for a browser's GET of /console, and everything under
// /console/$assets/ and /console/$api/, which no entity path can be (names
// hold no '$'). The console checks tokens itself, per call, as these
// routes do; the middleware around both applies protected mode to it.
func withConsole(web *console.Handler, routes http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isConsoleRequest(r) {
			web.ServeHTTP(w, r)
			return
		}
		routes.ServeHTTP(w, r)
	})
}

// routes lists every route the gateway serves. Order matters: the more
// specific runtime and subscription shapes come before the catch-all
// queue/topic path.
func (g *Gateway) routes() http.Handler {
	r := mux.NewRouter()
	r.SkipClean(true) // entity names are matched as sent; middleware trims slashes

	// AMQP over WebSockets (websocket.go); the middleware trims a trailing
	// slash. A WebSocket upgrade anywhere else is a client pointed at the
	// wrong path, not an entity request.
	r.Path(webSocketPath).Methods(http.MethodGet).Handler(g.webSocket())
	r.Use(g.webSocketElsewhere)

	// The namespaces API (namespaces.go); '$' keeps it apart from entity
	// paths.
	g.nsRoutes(r)

	// Health and namespace (no entity).
	r.Path("/health").Methods(http.MethodGet).HandlerFunc(g.health)
	r.Path("/{_ns:(?i:\\$namespaceinfo)}").Methods(http.MethodGet).Handler(g.manage(g.namespaceInfo))

	// Runtime (rest.md §1.2). Entity paths include subscriptions and
	// $DeadLetterQueue subqueues; core.ParseAddress splits them.
	r.Path("/" + entityVar + "/" + segMessages + "/" + segHead).Methods(http.MethodPost).Handler(g.listen(g.peekLock))
	r.Path("/" + entityVar + "/" + segMessages + "/" + segHead).Methods(http.MethodDelete).Handler(g.listen(g.receiveAndDelete))
	r.Path("/" + entityVar + "/" + segMessages + "/{id}/{lock}").Methods(http.MethodPut).Handler(g.listen(g.unlock))
	r.Path("/" + entityVar + "/" + segMessages + "/{id}/{lock}").Methods(http.MethodDelete).Handler(g.listen(g.complete))
	r.Path("/" + entityVar + "/" + segMessages + "/{id}/{lock}").Methods(http.MethodPost).Handler(g.listen(g.renew))
	r.Path("/" + entityVar + "/" + segMessages).Methods(http.MethodPost).Handler(g.send(g.sendMessages))

	// Management (rest.md §4.1).
	r.Path("/" + segRes + "/" + segKind).Methods(http.MethodGet).Handler(g.manage(g.listEntities))
	rule := "/" + topicVar + "/" + segSubs + "/{sub}/" + segRules + "/{rule}"
	// Reading rules, one or all, needs Listen (which Manage implies), as
	// enumerating them does on the service (rest.md §3.2); changing them
	// needs Manage.
	r.Path(rule).Methods(http.MethodGet).Handler(g.listen(g.getRule))
	r.Path(rule).Methods(http.MethodPut).Handler(g.manage(g.putRule))
	r.Path(rule).Methods(http.MethodDelete).Handler(g.manage(g.deleteRule))
	r.Path("/" + topicVar + "/" + segSubs + "/{sub}/" + segRules).Methods(http.MethodGet).Handler(g.listen(g.listRules))
	sub := "/" + topicVar + "/" + segSubs + "/{sub}"
	r.Path(sub).Methods(http.MethodGet).Handler(g.manage(g.getSubscription))
	r.Path(sub).Methods(http.MethodPut).Handler(g.manage(g.putSubscription))
	r.Path(sub).Methods(http.MethodDelete).Handler(g.manage(g.deleteSubscription))
	r.Path("/" + topicVar + "/" + segSubs).Methods(http.MethodGet).Handler(g.manage(g.listSubscriptions))
	r.Path("/" + entityVar).Methods(http.MethodGet).Handler(g.manage(g.getEntity))
	r.Path("/" + entityVar).Methods(http.MethodPut).Handler(g.manage(g.putEntity))
	r.Path("/" + entityVar).Methods(http.MethodDelete).Handler(g.manage(g.deleteEntity))

	r.NotFoundHandler = http.HandlerFunc(g.notFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(g.methodNotAllowed)
	return r
}
