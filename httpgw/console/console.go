package console

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Paths the console is served at. Entity names cannot hold '$', so
// nothing under AssetsPath or APIPath can be an entity's path.
const (
	PagePath   = "/console"
	AssetsPath = "/console/$assets/"
	APIPath    = "/console/$api/"
)

// DefaultSessionTTL is how long a token issued by the login endpoint
// lasts.
const DefaultSessionTTL = time.Hour

//go:embed assets
var assets embed.FS

// Config configures a [Handler].
type Config struct {
	// Namespaces are what the API reads and changes: a call reaches the
	// namespace its token names, as a gateway request does
	// (namespace.Registry.Resolve). The gateway passes its own, so the
	// console accepts exactly the credentials the REST API accepts.
	// Nil: the one namespace of Broker, checked with Auth.
	Namespaces *namespace.Registry
	// Broker and Auth are the one namespace's broker and validator when
	// Namespaces is nil.
	Broker *core.Broker
	Auth   *sas.Validator
	// Logger receives failures. Default: zap.NewNop().
	Logger *zap.Logger
	// SessionTTL is the lifetime of tokens the login endpoint issues.
	// Default [DefaultSessionTTL].
	SessionTTL time.Duration
	// Memory is the process's memory budget: a peek takes the bodies it
	// loads from it and answers 503 when it has no room. Nil: no bound
	// but a page's own (messages.go).
	Memory *membudget.Budget
}

// Handler serves the console's page, assets and API. Mount it for
// [PagePath] (GET without an Authorization header: a browser
// navigating) and for everything under [AssetsPath] and [APIPath].
type Handler struct {
	reg    *namespace.Registry
	log    *zap.Logger
	mem    *membudget.Budget
	ttl    time.Duration
	logins *loginThrottle // failed logins per client (throttle.go)
	files  http.Handler
	index  []byte
	mux    *http.ServeMux
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Namespaces == nil {
		if cfg.Broker == nil || cfg.Auth == nil {
			return nil, errors.New("console: Config.Namespaces, or Config.Broker and Config.Auth, are required")
		}
		cfg.Namespaces = namespace.Single(cfg.Broker.Namespace(), cfg.Broker, cfg.Auth)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		return nil, err
	}
	h := &Handler{
		reg: cfg.Namespaces, log: cfg.Logger, mem: cfg.Memory, ttl: cfg.SessionTTL,
		logins: newLoginThrottle(time.Now),
		files:  http.StripPrefix(AssetsPath, http.FileServerFS(sub)),
		index:  index,
	}
	h.mux = h.apiRoutes()
	return h, nil
}

// IsPageRequest tells whether r asks for the console's page: a GET or
// HEAD of [PagePath] with no Authorization header. A request with one is
// a client managing an entity named "console", which the gateway's own
// routes serve.
func IsPageRequest(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.URL.Path == PagePath &&
		r.Header.Get("Authorization") == "" && r.Header.Get("ServiceBusAuthorization") == ""
}

// ServeHTTP serves the page, an asset or an API call.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	switch p := r.URL.Path; {
	case p == PagePath:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(h.index)
	case strings.HasPrefix(p, AssetsPath):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeJSONError(w, http.StatusMethodNotAllowed, "assets are read with GET")
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.files.ServeHTTP(w, r)
	case strings.HasPrefix(p, APIPath):
		h.mux.ServeHTTP(w, r)
	default:
		writeJSONError(w, http.StatusNotFound, "no such console path")
	}
}

// secureHeaders keeps the page from running anything but its own
// scripts (an injected <script> or inline handler would not run even if
// escaping failed), from being framed, and from leaking its URL.
func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}
