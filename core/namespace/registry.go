package namespace

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/prefixstore"
)

// DefaultMaxNamespaces bounds the namespaces of a registry, the default
// one included, when Config.MaxNamespaces is zero.
const DefaultMaxNamespaces = 1000

// DefaultName is the default namespace's name when Config.DefaultName is
// empty (no Config.json names one).
const DefaultName = "omnibus"

// ErrTestClockOff is returned by [Registry.AdvanceClock] and
// [Registry.DeliverScheduled] when the registry runs without the test
// clock.
var ErrTestClockOff = errors.New("namespace: the test clock is off; start omnibus with --allow-test-clock to move a namespace's clock")

// Config configures a [Registry].
type Config struct {
	// Store is the one store every namespace lives in. Required.
	Store storage.Store
	// NewBroker opens the broker of a namespace on its store view and
	// clock (the caller's core.Config: limits, logging, statistics).
	// Required.
	NewBroker func(name string, s storage.Store, clk clock.Clock) (*core.Broker, error)
	// Clock is the base clock; default clock.Real{}.
	Clock clock.Clock
	// TestClock runs every namespace on a clock of its own that
	// AdvanceClock moves forward (--allow-test-clock).
	TestClock bool
	// DefaultName names the default namespace (Config.json's first);
	// empty means [DefaultName].
	DefaultName string
	// RootRules are the process's own rules (the emulator's
	// RootManageSharedAccessKey, or --key-name/--key): always in force on
	// the default namespace, and on every namespace without rules of its
	// own. Not checked against ValidateAuthorizationRules' key length, so
	// the emulator's well-known short key keeps working.
	RootRules []sas.Rule
	// ClockSkew and TokenNow are the validators' (sas.Config).
	ClockSkew time.Duration
	TokenNow  func() time.Time
	// MaxNamespaces bounds the namespaces, the default one included; 0
	// means [DefaultMaxNamespaces].
	MaxNamespaces int
	// Limits are the limits of every namespace that has none of its own
	// (limits.go); a zero field means no cap. The broker's share
	// (MaxEntities, MaxEntityBytes) is set on each namespace's broker
	// once NewBroker has opened it.
	Limits Limits
	// Logger; default zap.NewNop().
	Logger *zap.Logger
	// Shared, when set, keeps the registry's records instead of Store
	// (shared.go): a cluster with data groups, whose namespaces' entities
	// live in its data groups. Store then holds no record, and Open opens
	// the default namespace alone; Sync opens the others.
	Shared Shared
	// NoSweep leaves key ranges no namespace owns where they are, so that
	// Open writes nothing (an offline check reads a data directory).
	NoSweep bool
}

// Registry holds the namespaces of one omnibus. Its methods are safe for
// concurrent use.
type Registry struct {
	cfg Config
	log *zap.Logger
	def *Namespace

	// manage serialises the changes (create, delete, rules, clock) so
	// that the store and memory change in the same order. Taken before
	// mu.
	manage sync.Mutex
	nextID uint64 // guarded by manage

	catchUps catchUps // catchup.go

	mu struct {
		sync.RWMutex // guards the fields below
		byName       map[string]*Namespace
		onDelete     []func(*Namespace)
		closed       bool
	}
}

func (c *Config) validate() error {
	if c.Store == nil || c.NewBroker == nil {
		return errors.New("namespace: Config.Store and Config.NewBroker are required")
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.DefaultName == "" {
		c.DefaultName = DefaultName
	}
	c.DefaultName = strings.ToLower(c.DefaultName)
	if c.MaxNamespaces <= 0 {
		c.MaxNamespaces = DefaultMaxNamespaces
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return nil
}

// Open opens every namespace the store holds: the default one on the
// unprefixed keys, the others on their ranges. It deletes key ranges no
// namespace owns any more (writes that raced a deletion).
func Open(cfg Config) (r *Registry, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r = &Registry{cfg: cfg, log: cfg.Logger, nextID: 1}
	r.mu.byName = make(map[string]*Namespace)
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if v, err := cfg.Store.Get(keyNextID); err == nil && len(v) == 8 {
		r.nextID = binary.BigEndian.Uint64(v)
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("namespace: reading the registry: %w", err)
	}

	defRec := Record{Name: cfg.DefaultName, Created: cfg.Clock.Now().UTC()}
	switch v, err := cfg.Store.Get(keyDefault); {
	case err == nil:
		if err := json.Unmarshal(v, &defRec); err != nil {
			return nil, fmt.Errorf("namespace: the default namespace's record: %w", err)
		}
		defRec.Name = cfg.DefaultName
	case errors.Is(err, storage.ErrNotFound):
	default:
		return nil, fmt.Errorf("namespace: reading the registry: %w", err)
	}
	if r.def, err = r.open(defRec, cfg.Store); err != nil {
		return nil, err
	}
	r.mu.byName[r.def.name] = r.def

	var recs []Record
	err = cfg.Store.Scan([]byte{tagRecord}, nil, func(k, v []byte) (bool, error) {
		var rec Record
		if err := json.Unmarshal(v, &rec); err != nil {
			return false, fmt.Errorf("namespace: the record of %q: %w", k[1:], err)
		}
		recs = append(recs, rec)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if rec.Name == r.def.name {
			return nil, fmt.Errorf("namespace: the default namespace is named %q, but a namespace of that name exists already; "+
				"name the default namespace otherwise in Config.json, or delete that namespace first", rec.Name)
		}
		ns, err := r.open(rec, prefixstore.New(cfg.Store, dataPrefix(rec.ID)))
		if err != nil {
			return nil, err
		}
		r.mu.byName[ns.name] = ns
	}
	if !cfg.NoSweep {
		if err := r.sweep(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// open starts the broker of a namespace on s.
func (r *Registry) open(rec Record, s storage.Store) (*Namespace, error) {
	n := &Namespace{reg: r, name: rec.Name, id: rec.ID, created: rec.Created, deleted: make(chan struct{})}
	var clk clock.Clock = r.cfg.Clock
	if r.cfg.TestClock {
		n.clk = clock.NewOffset(r.cfg.Clock, rec.Ahead)
		clk = n.clk
	} else if rec.Ahead > 0 {
		r.log.Warn("a namespace's test clock was moved forward, but the test clock is off: it runs on real time again",
			zap.String("namespace", rec.Name), zap.Duration("ahead", rec.Ahead))
	}
	if err := n.setRules(rec.Rules); err != nil {
		return nil, fmt.Errorf("namespace %q: %w", rec.Name, err)
	}
	b, err := r.cfg.NewBroker(rec.Name, s, clk)
	if err != nil {
		return nil, fmt.Errorf("namespace %q: %w", rec.Name, err)
	}
	n.broker = b
	n.setLimits(rec.Limits)
	return n, nil
}

// setRules makes own the namespace's own rules and rebuilds its
// validator.
func (n *Namespace) setRules(own []core.AuthorizationRule) error {
	v, err := n.reg.validator(n.name, n.reg.namespaceRules(n.IsDefault(), own))
	if err != nil {
		return err
	}
	if len(own) == 0 {
		own = nil
	}
	n.own.Store(&own)
	n.auth.Store(v)
	return nil
}

// sweep deletes the key ranges of namespaces that no longer exist: a
// write that raced the deletion of its namespace lands there. Each range
// costs one seek.
func (r *Registry) sweep() error {
	live := make(map[uint64]bool)
	for _, ns := range r.mu.byName {
		live[ns.id] = true
	}
	var start []byte
	for {
		var stray []byte
		var next []byte
		err := r.cfg.Store.Scan([]byte{tagData}, start, func(k, _ []byte) (bool, error) {
			if len(k) < 9 {
				stray = slices.Clone(k)
				return false, nil
			}
			id := binary.BigEndian.Uint64(k[1:9])
			if !live[id] {
				stray = dataPrefix(id)
			}
			if id != ^uint64(0) {
				next = dataPrefix(id + 1)
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("namespace: looking for stray namespace data: %w", err)
		}
		if stray != nil {
			b := storage.Batch{Sync: true}
			b.DeletePrefix(stray)
			if err := r.cfg.Store.Apply(&b); err != nil {
				return fmt.Errorf("namespace: deleting stray namespace data: %w", err)
			}
			r.log.Info("deleted the data of a namespace deleted earlier", zap.Binary("prefix", stray))
		}
		if next == nil {
			return nil
		}
		start = next
	}
}

// Single returns a registry of one namespace, named name, over broker
// b, that checks tokens with v alone (nil: no authentication). It cannot
// create namespaces; the fronts use it when they are given a broker
// rather than a registry.
func Single(name string, b *core.Broker, v *sas.Validator) *Registry {
	r := &Registry{cfg: Config{DefaultName: name, Clock: clock.Real{}, MaxNamespaces: 1}, log: zap.NewNop()}
	r.def = &Namespace{reg: r, name: strings.ToLower(name), broker: b, fixed: v, nilAuth: v == nil, deleted: make(chan struct{})}
	r.mu.byName = map[string]*Namespace{r.def.name: r.def}
	return r
}

// Default returns the default namespace.
func (r *Registry) Default() *Namespace { return r.def }

// Get returns the namespace named name (any case), or an error that is a
// core.ErrNotFound.
func (r *Registry) Get(name string) (*Namespace, error) {
	if ns := r.lookup(name); ns != nil {
		return ns, nil
	}
	return nil, notFound(name)
}

func notFound(name string) error {
	return &core.Error{Code: core.CodeNotFound, Msg: "The namespace '" + name + "' could not be found."}
}

func (r *Registry) lookup(name string) *Namespace {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byName[strings.ToLower(name)]
}

// List returns every namespace, the default one first, then by name.
func (r *Registry) List() []*Namespace {
	r.mu.RLock()
	out := make([]*Namespace, 0, len(r.mu.byName))
	for _, ns := range r.mu.byName {
		if ns != r.def {
			out = append(out, ns)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Namespace) int { return strings.Compare(a.name, b.name) })
	return append([]*Namespace{r.def}, out...)
}

// Len returns the number of namespaces, the default one included.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.mu.byName)
}

// ForHost returns the namespace a host name (a Host header, an AMQP
// open's hostname, a TLS server name; port optional) names by its first
// label, and true; or the default namespace and false when it names none
// (localhost, an IP address, an unknown name).
func (r *Registry) ForHost(hostport string) (*Namespace, bool) {
	if label := hostLabel(hostport); label != "" {
		if ns := r.lookup(label); ns != nil {
			return ns, true
		}
	}
	return r.def, false
}

// ForKeyName returns the namespace a SAS key name picks, and true: the
// namespace after an '@' ("RootManageSharedAccessKey@sales"), the
// namespace of that name ("sales"), or the one namespace that has a
// namespace-level rule of that name. A name of one of the default
// namespace's rules, an ambiguous or an unknown name picks none: it
// returns nil and false. A name with an '@' and an unknown namespace
// after it also returns nil and false.
func (r *Registry) ForKeyName(keyName string) (*Namespace, bool) {
	if i := strings.LastIndexByte(keyName, '@'); i >= 0 {
		ns := r.lookup(keyName[i+1:])
		return ns, ns != nil
	}
	for _, rule := range r.namespaceRules(true, r.def.Rules()) {
		if rule.KeyName == keyName {
			return nil, false
		}
	}
	if ns := r.lookup(keyName); ns != nil {
		return ns, true
	}
	var found *Namespace
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, ns := range r.mu.byName {
		if ns == r.def {
			continue
		}
		for _, rule := range ns.Rules() {
			if rule.KeyName == keyName {
				if found != nil {
					return nil, false
				}
				found = ns
				break
			}
		}
	}
	return found, found != nil
}

// OnDelete registers f to be called, once the deletion of a namespace is
// durable and before Delete returns: the fronts end what their clients
// hold in it.
func (r *Registry) OnDelete(f func(*Namespace)) {
	r.mu.Lock()
	r.mu.onDelete = append(r.mu.onDelete, f)
	r.mu.Unlock()
}

// Close closes every namespace's broker. It does not close the store.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	all := make([]*Namespace, 0, len(r.mu.byName))
	for _, ns := range r.mu.byName {
		all = append(all, ns)
	}
	r.mu.Unlock()
	var errs []error
	for _, ns := range all {
		if ns.broker != nil {
			errs = append(errs, ns.broker.Close())
		}
	}
	return errors.Join(errs...)
}

// Resolve returns the namespace a client names by host (a Host header,
// an AMQP hostname; "" for none), by a credential's key name ("" for
// none) and by its token's audience host ("" for none), and whether any
// of them named one; the default namespace and false when none does.
// Names that disagree are refused with a sas.ErrInvalidAudience error,
// and a key name "rule@ns" for a namespace that does not exist with a
// sas.ErrUnknownKey one (both *sas.Error): on a shared registry, only
// after catching up (catchup.go), up to CatchUpTimeout; when the
// catch-up fails (what keeps the records has no reachable leader), with
// a core.ErrServerBusy instead, since the namespace may well exist.
func (r *Registry) Resolve(host, keyName, tokenHost string) (*Namespace, bool, error) {
	var picked *Namespace
	var by string
	pick := func(n *Namespace, what string) error {
		switch {
		case picked == nil:
			picked, by = n, what
		case picked != n:
			return &sas.Error{Err: sas.ErrInvalidAudience, Detail: "The token is for namespace '" + n.Name() + "' (" + what +
				"), but the request is to namespace '" + picked.Name() + "' (" + by + ")."}
		}
		return nil
	}
	if n, ok := r.ForHost(host); ok {
		picked, by = n, "its host '"+host+"'"
	}
	if keyName != "" {
		n, ok := r.ForKeyName(keyName)
		var behind error
		if !ok && r.cfg.Shared != nil && strings.Contains(keyName, "@") {
			behind = r.catchUp() // created through another process a moment ago?
			n, ok = r.ForKeyName(keyName)
		}
		if ok {
			if err := pick(n, "its key name '"+keyName+"'"); err != nil {
				return nil, false, err
			}
		} else if behind != nil {
			// The records could not be asked (no leader of what keeps
			// them): the namespace may exist. Retry, not unauthorized.
			return nil, false, &core.Error{Code: core.CodeServerBusy,
				Msg: "Key name '" + keyName + "' names a namespace this node cannot look up now (" + behind.Error() + "); retry shortly."}
		} else if strings.Contains(keyName, "@") {
			return nil, false, &sas.Error{Err: sas.ErrUnknownKey,
				Detail: "The token has an invalid signature. Key name '" + keyName + "' names no namespace of this server."}
		}
	}
	if n, ok := r.ForHost(tokenHost); ok {
		if err := pick(n, "its audience '"+tokenHost+"'"); err != nil {
			return nil, false, err
		}
	}
	if picked == nil {
		return r.def, false, nil
	}
	return picked, true, nil
}
