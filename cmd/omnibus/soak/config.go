package soak

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Config is one soak run. The zero value of a field means its default
// (see [NewFlagSet]).
type Config struct {
	// Binary is the omnibus executable to start as the broker, and
	// BrokerArgs more flags for it (the soak's own come first).
	Binary     string
	BrokerArgs []string
	// Dir holds the broker's data directory, its Config.json and its log
	// ("" makes a temporary one, removed after a passing run unless Keep).
	Dir  string
	Keep bool

	Kills int // SIGKILLs, each followed by a restart
	// DiskFaults are failing disks, each followed by a restart: the
	// broker's write-ahead log fsyncs start failing under load (SIGUSR1
	// to a broker started with --fail-fsync-on-sigusr1), every send in
	// flight must be answered, and SIGTERM must then end the broker
	// within 5 s with exit status 1. They take turns with the kills, in
	// an order drawn from Seed.
	DiskFaults int
	MinUptime  time.Duration // the broker runs under load a random time in [MinUptime, MaxUptime] before each kill
	MaxUptime  time.Duration
	Seed       uint64 // random seed of the kill moments (0: from the clock)

	// Subscriptions > 0 loads a topic with that many subscriptions, each
	// of which must receive every message, instead of a queue.
	Subscriptions int

	Senders   int // sender connections (one link each)
	Inflight  int // unsettled sends in flight per sender link
	Receivers int // receiver connections (one peek-lock link each) per queue or subscription
	Credit    int // link credit per receiver
	Settlers  int // completions in flight per receiver
	Size      int // payload bytes (0: 1024)

	// DrainTimeout bounds the final drain: receivers give up after this
	// long without a delivery, and what is still missing counts as lost.
	DrainTimeout time.Duration
	// ReadyTimeout bounds each restart: a broker not accepting
	// connections, or not acknowledging a send, by then fails the run (a
	// hang, not a slow start).
	ReadyTimeout time.Duration
}

// Defaults of the full soak (make soak).
const (
	DefaultKills     = 20
	DefaultMinUptime = time.Second
	DefaultMaxUptime = 4 * time.Second
)

// NewFlagSet returns the soak flags bound to c.
func NewFlagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("omnibus-tools soak", flag.ContinueOnError)
	fs.StringVar(&c.Binary, "binary", "", "omnibus executable to run as the broker (default: the omnibus beside omnibus-tools, else on PATH)")
	fs.StringVar(&c.Dir, "dir", "", "directory for the broker's data, Config.json and log (default: a temporary one)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temporary directory after a passing run (a failing run always keeps it)")
	fs.IntVar(&c.Kills, "kills", DefaultKills, "SIGKILLs, each followed by a restart on the same data directory")
	fs.IntVar(&c.DiskFaults, "disk-faults", 0, "failing disks, each followed by a restart: the write-ahead log's fsyncs fail under load, every send in flight must be answered and SIGTERM must end the broker within 5 s with exit status 1")
	fs.DurationVar(&c.MinUptime, "min-uptime", DefaultMinUptime, "shortest time the broker runs under load (from its first acknowledged send) before a kill")
	fs.DurationVar(&c.MaxUptime, "max-uptime", DefaultMaxUptime, "longest time the broker runs under load before a kill")
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed of the kill moments (0: from the clock; the run prints it)")
	fs.IntVar(&c.Subscriptions, "subscriptions", 0, "load a topic with this many subscriptions instead of a queue (each receives every message)")
	fs.IntVar(&c.Senders, "senders", 4, "sender connections")
	fs.IntVar(&c.Inflight, "inflight", 32, "unsettled sends in flight per sender")
	fs.IntVar(&c.Receivers, "receivers", 4, "peek-lock receiver connections (per subscription with --subscriptions)")
	fs.IntVar(&c.Credit, "credit", 200, "link credit per receiver")
	fs.IntVar(&c.Settlers, "settlers", 32, "completions in flight per receiver")
	fs.IntVar(&c.Size, "size", 1024, "payload bytes")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", time.Minute, "the final drain gives up after this long without a delivery")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", time.Minute, "a restarted broker must accept connections and acknowledge a send within this")
	return fs
}

var errUsage = errors.New("soak: usage")

// IsUsage reports whether err is a configuration error.
func IsUsage(err error) bool { return errors.Is(err, errUsage) }

// validate fills defaults and refuses nonsense.
func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
	}
	if c.Binary == "" {
		return bad("no broker binary")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Kills, DefaultKills)
	def(&c.Senders, 4)
	def(&c.Inflight, 32)
	def(&c.Receivers, 4)
	def(&c.Credit, 200)
	def(&c.Settlers, 32)
	def(&c.Size, 1024)
	if c.MinUptime == 0 {
		c.MinUptime = DefaultMinUptime
	}
	if c.MaxUptime == 0 {
		c.MaxUptime = DefaultMaxUptime
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = time.Minute
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = time.Minute
	}
	if c.Kills < 0 || c.DiskFaults < 0 || c.Senders < 1 || c.Inflight < 1 || c.Receivers < 1 || c.Credit < 1 || c.Settlers < 1 || c.Size < 1 || c.Subscriptions < 0 {
		return bad("--kills, --disk-faults and --subscriptions must be ≥ 0, and --senders, --inflight, --receivers, --credit, --settlers, --size ≥ 1")
	}
	if c.MinUptime <= 0 || c.MaxUptime < c.MinUptime {
		return bad("want 0 < --min-uptime ≤ --max-uptime")
	}
	return nil
}
