// Package app assembles a complete omnibus — storage, core, the AMQP
// front and the HTTP gateway — from [Options]. The omnibus binary runs
// one; the conformance suite and end-to-end tests start one in process.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver"
	"github.com/omnibusmq/omnibus/cmd/omnibus/metrics"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/emuconfig"
	"github.com/omnibusmq/omnibus/core/loglimit"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// Defaults, matching Microsoft's emulator so its connection string works.
const (
	DefaultDataDir   = "./omnibus-data"
	DefaultAMQPAddr  = ":5672"
	DefaultAMQPSAddr = ":5671"
	DefaultHTTPAddr  = ":5300"
	DefaultHTTPSAddr = ":5443"
	DefaultKeyName   = "RootManageSharedAccessKey"
	DefaultKey       = "SAS_KEY_VALUE"
)

// Options configure an [App]. Zero values mean the defaults above; set
// an address to "-" to disable that listener.
type Options struct {
	DataDir    string
	Memory     bool   // in-memory store: nothing written to disk
	ConfigPath string // emulator Config.json; "" for none
	AMQPAddr   string
	AMQPSAddr  string // AMQP over TLS, with the HTTPS certificate
	HTTPAddr   string
	HTTPSAddr  string
	TLSCert    string // PEM files for HTTPS and AMQPS; empty: generate (see TLSDir)
	TLSKey     string
	// TLSDir keeps the generated local CA and server certificate; empty:
	// DataDir (with Memory, $TMPDIR/omnibus-tls).
	TLSDir string
	// TLSHosts are host names and IP addresses the generated certificate
	// names besides localhost, 127.0.0.1 and ::1.
	TLSHosts       []string
	KeyName        string
	Key            string
	MaxConnections int // AMQP connections; 0 = default (5000), < 0 = no cap
	Logger         *zap.Logger
	Clock          clock.Clock // default real time
	Faults         core.Faults // test-only non-conformance switches

	// LogLimiter bounds the log lines peers can cause, for everything
	// that shares it (core/loglimit); nil: one made by setDefaults, which
	// a cluster node's brokers then share.
	LogLimiter *loglimit.Limiter

	// More AMQP connection limits; zero means amqpserver's default.
	MaxPendingConnections int           // sockets in the handshake; < 0 = no cap
	AuthTimeout           time.Duration // from accept to a login or a valid $cbs token

	// AMQPLimits bounds what one open AMQP connection holds; zero fields
	// mean amqpserver's defaults.
	AMQPLimits amqpserver.Limits

	// The store on disk (pebblestore.Options).
	DiskReserve int64 // bytes kept free on the data disk; 0 = pebblestore.DefaultDiskReserve, < 0 = none
	Repair      bool  // start on a damaged write-ahead log, accepting the loss
	// FailLogSyncs, once true, fails every fsync of the write-ahead log
	// (pebblestore.Options.FailLogSyncs): a failing disk, for tests.
	FailLogSyncs *atomic.Bool

	// HTTP gateway limits (httpgw.Config); zero means httpgw's default.
	HTTPReadTimeout    time.Duration // a whole request, body included
	HTTPWriteTimeout   time.Duration // a response (a long poll gets its wait added)
	HTTPIdleTimeout    time.Duration // a keep-alive between requests
	HTTPMaxConnections int           // HTTP and HTTPS together; 0: httpgw's default, negative: unlimited
	// AllowRemote serves clients on other machines even with the publicly
	// known DefaultKey (protected mode off).
	AllowRemote bool
	// AllowedHosts are host names HTTP, HTTPS and WebSocket requests may
	// name in Host besides localhost (and *.localhost), IP addresses, this
	// machine's names, TLSHosts and a cluster's peers; "*.example.com"
	// covers the names under example.com, "*" any name. Other names get
	// 421 (hosts.go): with the publicly known key always, with a key of
	// one's own only when this list is given.
	AllowedHosts []string
	// AllowedOrigins are the origins ("http://localhost:8080") of web pages
	// that may open AMQP over WebSockets; "*": any. With the publicly known
	// key none may unless listed; with a key of one's own any may unless
	// this list is given. Upgrades without an Origin (no browser) pass.
	AllowedOrigins []string
	// CheckConsistency compares the recovered broker's memory with the
	// store before the listeners start and logs what differs (check.go).
	CheckConsistency bool
	// TokenClockSkew is how long after its expiry a SAS token is still
	// accepted, on both fronts; a link attached on a $cbs token is
	// detached once its token's expiry plus this has passed. 0 means
	// sas.DefaultClockSkew (5 minutes), < 0 none.
	TokenClockSkew time.Duration

	// The core's memory bounds (dedup history, body cache); zero fields mean the defaults.
	Limits core.Limits
	// PartitionCount is how many partitions a queue or topic created with
	// EnablePartitioning gets (core.Config.PartitionCount); 0 means
	// core.DefaultPartitionCount, Service Bus Standard's 16.
	PartitionCount int
	// MaxOutbox bounds, in a cluster with data groups, the transfers a
	// group's outbox holds for other groups (core.TransferConfig); 0
	// means core.DefaultMaxOutbox.
	MaxOutbox int
	// MaxMemory is the memory budget of what peers make omnibus hold
	// (core/membudget): 0 means membudget.DefaultLimit (half the
	// machine's or the cgroup's memory), < 0 none.
	MaxMemory int64
	// TxnTimeout is how long a transaction may stay open after its first
	// operation (core.Config.TxnTimeout); zero means Service Bus's two
	// minutes.
	TxnTimeout time.Duration
	// TestClock lets a Manage caller move a namespace's clock forward
	// and deliver scheduled messages now (--allow-test-clock;
	// core/namespace). Never in production: it breaks time for every
	// client of that namespace.
	TestClock bool
	// MaxNamespaces bounds the namespaces, the default one included; 0
	// means namespace.DefaultMaxNamespaces. Each namespace's limits
	// default to Limits.MaxEntities, Limits.MaxEntityBytes and
	// MaxConnections (namespaceLimits); Config.json and the namespaces
	// API give a namespace limits of its own.
	MaxNamespaces int

	// Store, when set, is the store to run on instead of opening one (a
	// cluster node's Session, see cluster.go); Shutdown closes it.
	Store storage.Store
	// Listen, when set, gives the fronts their listeners ("amqp", "http",
	// "https") instead of net.Listen (a cluster hands them the
	// connections it accepts, see cluster_listen.go).
	Listen func(front, addr string) (net.Listener, error)

	// MetricsAddr serves Prometheus metrics at /metrics on a listener of
	// its own (metrics.go); empty or "-": none, and the core keeps no
	// statistics. The binary's default is DefaultMetricsAddr.
	MetricsAddr string
	// MetricsMaxEntities bounds the entities with metrics of their own
	// (0: metrics.DefaultMaxEntities); the rest are summed as "other".
	MetricsMaxEntities int
	// Stats keeps the core's per-entity statistics even without a metrics
	// listener (the console's rate charts read them).
	Stats bool

	// router, when set, makes the namespaces' brokers routed ones
	// (core.Config.Router): a node of a cluster with data groups
	// (cluster_routed.go) names the router of each namespace by name.
	router func(namespace string) core.Router
	// sharedNamespaces, when set, keeps the namespace registry's records
	// (namespace.Config.Shared): a cluster with data groups keeps them in
	// its meta group (cluster_namespaces.go).
	sharedNamespaces namespace.Shared
	// namespace names the default namespace when no config file does (a
	// routed App applies its config file itself: cluster_routed.go).
	namespace string

	// knownHosts are more names of this omnibus for the host policy (a
	// cluster's peers), which they do not turn on by themselves.
	knownHosts []string

	// metricsSink, when set, takes the broker's metrics instead of a
	// listener of the App's own: a cluster node serves them on its
	// listener, with its Raft node's (cluster_metrics.go).
	metricsSink func(*metrics.Metrics)
	// peerCalls, when set, returns the calls this node made on others
	// (a routed node's, by operation), reported with the metrics.
	peerCalls func() map[string]int64
}

func (o *Options) setDefaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.DataDir, DefaultDataDir)
	def(&o.AMQPAddr, DefaultAMQPAddr)
	def(&o.AMQPSAddr, DefaultAMQPSAddr)
	def(&o.HTTPAddr, DefaultHTTPAddr)
	def(&o.HTTPSAddr, DefaultHTTPSAddr)
	def(&o.KeyName, DefaultKeyName)
	def(&o.Key, DefaultKey)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.LogLimiter == nil {
		o.LogLimiter = loglimit.New(loglimit.Config{})
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
}

// App is a running omnibus.
type App struct {
	opts  Options
	log   *zap.Logger
	store storage.Store
	// Namespaces are the namespaces the omnibus serves; Broker is the
	// default one's broker and Namespace its name.
	Namespaces *namespace.Registry
	Broker     *core.Broker
	Namespace  string
	// CAPath is the local CA's certificate, when the TLS certificate was
	// generated: the file clients add to their trusted roots.
	CAPath    string
	fronts    []front
	amqp      *amqpserver.Server  // nil when no listener needs it
	gw        *httpgw.Gateway     // nil when HTTP and HTTPS are off
	batches   *metrics.BatchStats // the core's storage batches, with metrics on
	amqpAddr  net.Addr
	amqpsAddr net.Addr
	httpAddr  net.Addr
	httpsAddr net.Addr
	// logLimit bounds the lines peers can make both fronts log.
	logLimit *loglimit.Limiter
	// Memory is the budget of what peers make both fronts hold.
	Memory *membudget.Budget
	// metricsAddr is the metrics listener's address (nil when off).
	metricsAddr net.Addr
	started     time.Time
	// admin serves the admin socket (backups) of a single node on disk.
	admin *adminServer
}

// front is a protocol listener the app starts and stops.
type front interface {
	shutdown(ctx context.Context) error
}

// Start opens the store, recovers the broker, applies the config file and
// starts the listeners. On error everything already started is stopped.
func Start(opts Options) (a *App, err error) {
	opts.setDefaults()
	a = &App{opts: opts, log: opts.Logger, started: time.Now(), logLimit: opts.LogLimiter,
		Memory: membudget.New(memoryLimit(opts.MaxMemory))}
	defer func() {
		if err != nil {
			a.Shutdown(context.Background())
			a = nil
		}
	}()
	var cfg *emuconfig.Config
	a.Namespace = opts.namespace
	if opts.ConfigPath != "" {
		if cfg, err = loadConfig(opts.ConfigPath); err != nil {
			return a, err
		}
		a.Namespace = cfg.Namespace
	}
	if a.store, err = openStore(opts); err != nil {
		return a, err
	}
	coreStore, stats := a.store, opts.Stats || a.metricsOn()
	if a.metricsOn() {
		a.batches = &metrics.BatchStats{}
		coreStore = metrics.CountBatches(a.store, a.batches)
	}
	cache := core.NewBodyCache() // one cache budget for every namespace
	a.Namespaces, err = namespace.Open(namespace.Config{Store: coreStore, Clock: opts.Clock, TestClock: opts.TestClock,
		DefaultName: a.Namespace, MaxNamespaces: opts.MaxNamespaces, ClockSkew: opts.TokenClockSkew, Logger: opts.Logger.Named("namespace"),
		Limits: opts.namespaceLimits(), RootRules: []sas.Rule{{KeyName: opts.KeyName, Key: opts.Key, Rights: sas.Manage}},
		Shared: opts.sharedNamespaces,
		NewBroker: func(name string, s storage.Store, clk clock.Clock) (*core.Broker, error) {
			var router core.Router
			if opts.router != nil {
				router = opts.router(name)
			}
			return core.New(core.Config{Store: s, Clock: clk, Logger: opts.Logger.Named("core").With(zap.String("namespace", name)),
				Namespace: name, Faults: opts.Faults, Limits: opts.Limits, Stats: stats, TxnTimeout: opts.TxnTimeout, BodyCache: cache,
				PartitionCount: opts.PartitionCount, Router: router})
		}})
	if err != nil {
		return a, fmt.Errorf("recovering the broker from %s: %w", a.storeName(), err)
	}
	a.Broker, a.Namespace = a.Namespaces.Default().Broker(), a.Namespaces.Default().Name()
	if opts.CheckConsistency {
		if err = a.checkConsistency(); err != nil {
			return a, err
		}
	}
	if cfg != nil {
		if err = applyNamespaces(a.Namespaces, cfg); err != nil {
			return a, err
		}
	}
	if err = a.startFronts(); err != nil {
		return a, err
	}
	if err = a.startMetrics(); err != nil {
		return a, err
	}
	if opts.Store == nil && !opts.Memory {
		a.admin = startAdmin(opts.DataDir, opts.DataDir, a.backup, a.log)
	}
	return a, nil
}

// backup checkpoints a single node's store: Pebble syncs its write-ahead
// log first, so every write acknowledged so far is in it.
func (a *App) backup(_ context.Context, dir string) (Manifest, error) {
	cp, ok := a.store.(interface{ Checkpoint(dir string) error })
	if !ok {
		return Manifest{}, fmt.Errorf("the store %T takes no checkpoints", a.store)
	}
	return Manifest{Kind: KindSingle}, cp.Checkpoint(dir)
}

// namespaceLimits are the limits of every namespace without its own:
// the process's entity cap, entity size cap and AMQP connection cap.
func (o *Options) namespaceLimits() namespace.Limits {
	l := namespace.Limits{MaxEntities: max(o.Limits.MaxEntities, 0), MaxEntityBytes: max(o.Limits.MaxEntityBytes, 0)}
	switch {
	case o.MaxConnections == 0:
		l.MaxConnections = amqpserver.DefaultMaxConnections
	case o.MaxConnections > 0:
		l.MaxConnections = o.MaxConnections
	}
	return l
}

// memoryLimit is the memory budget of Options.MaxMemory.
func memoryLimit(opt int64) int64 {
	switch {
	case opt < 0:
		return 0 // none
	case opt == 0:
		n, _ := membudget.DefaultLimit()
		return n
	}
	return opt
}

func loadConfig(path string) (*emuconfig.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	c, err := emuconfig.Load(f)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// probeWritable fails, saying what to do, when dir cannot take a new
// file: an image started without a writable volume at /data, most often.
// Pebble would fail too, later and with a lock-file error that says less.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".omnibus-probe-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable by this process (uid %d): %w; "+
			"give omnibus a writable directory (in a container: a volume at /data) or run with --memory", dir, os.Getuid(), err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func openStore(o Options) (storage.Store, error) {
	if o.Store != nil {
		return o.Store, nil
	}
	if o.Memory {
		return memstore.New(), nil
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := probeWritable(o.DataDir); err != nil {
		return nil, err
	}
	s, err := pebblestore.Open(o.DataDir, pebblestore.Options{Logger: o.Logger.Named("pebble"),
		DiskReserve: o.DiskReserve, Repair: o.Repair, FailLogSyncs: o.FailLogSyncs})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return s, nil
}

func (a *App) storeName() string {
	if a.opts.Store != nil {
		return "the cluster's store"
	}
	if a.opts.Memory {
		return "memory"
	}
	return a.opts.DataDir
}

// applyNamespaces applies the config file: the first namespace's
// entities, rules and limits to the default namespace, every other
// namespace created when it does not exist yet, with its rules, limits
// and entities. The file's rules and limits, when it gives them, replace
// those set at run time (its entities are created under its limits). A
// namespace created at run time and absent from the file is left alone.
func applyNamespaces(reg *namespace.Registry, c *emuconfig.Config) error {
	ctx := context.Background()
	for i, n := range c.Namespaces {
		ns, err := reg.Get(n.Name)
		switch {
		case i == 0:
			ns = reg.Default()
		case errors.Is(err, core.ErrNotFound):
			if ns, err = reg.CreateWithLimits(ctx, n.Name, n.AuthorizationRules, n.Limits); err != nil {
				return fmt.Errorf("config: namespace %q: %w", n.Name, err)
			}
		case err != nil:
			return err
		}
		if n.HasLimits && ns.OwnLimits() != n.Limits {
			if _, err := reg.SetLimits(ctx, ns.Name(), n.Limits); err != nil {
				return fmt.Errorf("config: namespace %q: %w", n.Name, err)
			}
		}
		if len(n.AuthorizationRules) > 0 {
			if _, err := reg.SetRules(ctx, ns.Name(), n.AuthorizationRules); err != nil {
				return fmt.Errorf("config: namespace %q: %w", n.Name, err)
			}
		}
		if err := applyConfig(ns.Broker(), n.Entities); err != nil {
			return fmt.Errorf("config: namespace %q: %w", n.Name, err)
		}
	}
	return nil
}

// applyConfig creates the config file's entities; existing ones keep
// their messages and take the file's properties (and rules, when the file
// lists any), as the emulator's config overrides runtime changes.
func applyConfig(b *core.Broker, entities []core.Entity) error {
	ctx := context.Background()
	// Forwarding targets may come later in the file: create every entity
	// without its forwarding first, then set forwarding once all exist.
	var forwarding []core.Entity
	for _, e := range entities {
		if e.ForwardTo != "" || e.ForwardDeadLetteredMessagesTo != "" {
			forwarding = append(forwarding, e)
			e.ForwardTo, e.ForwardDeadLetteredMessagesTo = "", ""
		}
		if err := applyEntity(ctx, b, e); err != nil {
			return err
		}
	}
	for _, e := range forwarding {
		e.Rules = nil
		if _, err := b.UpdateEntity(ctx, e); err != nil {
			return fmt.Errorf("config: forwarding of %s %q: %w", e.Kind, e.Path(), err)
		}
	}
	return nil
}

// applyEntity creates e, or updates an existing entity of that path. (In
// a cluster with data groups, an entity of the file not created yet is
// "pending" to everyone but this: cluster_configready.go.)
func applyEntity(ctx context.Context, b *core.Broker, e core.Entity) error {
	_, err := b.GetEntity(e.Path())
	switch {
	case errors.Is(err, core.ErrNotFound), errors.Is(err, errConfigPendingKind):
		if _, err := b.CreateEntity(ctx, e); err != nil {
			return fmt.Errorf("config: creating %s %q: %w", e.Kind, e.Path(), err)
		}
		return nil
	case err != nil:
		return err
	}
	rules := e.Rules
	if _, err := b.UpdateEntity(ctx, e); err != nil {
		return fmt.Errorf("config: updating %s %q: %w", e.Kind, e.Path(), err)
	}
	if e.Kind == core.KindSubscription && len(rules) > 0 {
		return syncRules(ctx, b, e.Path(), rules)
	}
	return nil
}

func syncRules(ctx context.Context, b *core.Broker, path string, want []core.Rule) error {
	have, err := b.ListRules(path)
	if err != nil {
		return err
	}
	for _, r := range have {
		if err := b.RemoveRule(ctx, path, r.Name); err != nil {
			return err
		}
	}
	for _, r := range want {
		if err := b.AddRule(ctx, path, r); err != nil {
			return fmt.Errorf("config: subscription %q rule %q: %w", path, r.Name, err)
		}
	}
	return nil
}

// ConnectionString returns the connection string clients use, in the
// emulator's form (UseDevelopmentEmulator=true: plain AMQP, no TLS).
func (a *App) ConnectionString() string {
	return a.connectionString(a.amqpAddr, "5672", ";UseDevelopmentEmulator=true;")
}

// TLSConnectionString returns the ordinary connection string, the one a
// cloud namespace has: the SDKs dial AMQPS (TLS), so they must trust the
// certificate (CAPath when it was generated). Empty when AMQPS is off.
func (a *App) TLSConnectionString() string {
	if a.amqpsAddr == nil {
		return ""
	}
	return a.connectionString(a.amqpsAddr, "5671", ";")
}

// connectionString names localhost and addr's port, unless it is the
// port the SDKs dial by default.
func (a *App) connectionString(addr net.Addr, defaultPort, tail string) string {
	endpoint := "sb://localhost"
	if addr != nil {
		if _, port, err := net.SplitHostPort(addr.String()); err == nil && port != defaultPort {
			endpoint += ":" + port
		}
	}
	if tail == ";" {
		endpoint += "/"
	}
	return "Endpoint=" + endpoint + ";SharedAccessKeyName=" + a.opts.KeyName +
		";SharedAccessKey=" + a.opts.Key + tail
}

// AMQPAddr is the AMQP listener's address (nil when disabled).
func (a *App) AMQPAddr() net.Addr { return a.amqpAddr }

// AMQPSAddr is the AMQP-over-TLS listener's address (nil when disabled).
func (a *App) AMQPSAddr() net.Addr { return a.amqpsAddr }

// HTTPAddr is the plain HTTP listener's address (nil when disabled).
func (a *App) HTTPAddr() net.Addr { return a.httpAddr }

// HTTPSAddr is the HTTPS listener's address (nil when disabled).
func (a *App) HTTPSAddr() net.Addr { return a.httpsAddr }

// Shutdown stops the listeners (letting in-flight work finish until ctx
// ends), then the broker, then the store. A store that a disk fault holds
// (a full disk under its log, an fsync that failed) gives up on its disk
// first, so that the sends waiting on it are answered (their outcome is
// unknown) instead of holding the shutdown; the store's Close then
// reports the fault.
func (a *App) Shutdown(ctx context.Context) error {
	a.admin.shutdown(ctx) // before the store closes under a backup
	a.admin = nil
	var errs []error
	a.giveUpOnDisk()
	for i := len(a.fronts) - 1; i >= 0; i-- {
		if err := a.fronts[i].shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	a.fronts = nil
	a.giveUpOnDisk() // the disk may have failed while the fronts drained
	if a.Namespaces != nil {
		errs = append(errs, a.Namespaces.Close())
		a.Namespaces, a.Broker = nil, nil
	}
	if a.store != nil {
		errs = append(errs, a.store.Close())
		a.store = nil
	}
	return errors.Join(errs...)
}

// giveUpOnDisk has a store that a disk fault holds stop waiting for the
// disk (pebblestore.Store.GiveUpOnDisk); other stores have no such wait.
func (a *App) giveUpOnDisk() {
	if g, ok := a.store.(interface{ GiveUpOnDisk() bool }); ok {
		g.GiveUpOnDisk()
	}
}

func disabled(addr string) bool { return addr == "-" || strings.EqualFold(addr, "off") }
