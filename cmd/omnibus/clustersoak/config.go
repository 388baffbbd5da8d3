package clustersoak

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Config is one soak run; zero fields mean the defaults of NewFlagSet.
type Config struct {
	// Binary is the omnibus executable the nodes run.
	Binary string
	// Dir holds the nodes' data, Config.json and logs ("" makes a
	// temporary one, removed after a passing run unless Keep).
	Dir  string
	Keep bool

	Failovers int           // leaders deposed
	MinUptime time.Duration // under load a random time in [MinUptime, MaxUptime] before each failover
	MaxUptime time.Duration
	Seed      uint64 // random seed (0: from the clock)
	// Mode is how failovers depose: "kill" (SIGKILL only), or "mixed"
	// (SIGKILL, cutting off where namespaces exist, SIGSTOP, in turn:
	// faults.go).
	Mode string
	// Netns: "auto" (network namespaces when the machine allows, else
	// loopback with SIGSTOP for a cut-off), "on" (fail without them),
	// "off" (loopback).
	Netns string

	Senders   int // SDK clients sending
	Inflight  int // sends in flight per sender
	Receivers int // SDK clients receiving in peek-lock
	Prefetch  int // messages asked for per receive call
	Size      int // payload bytes

	// Backlog messages are sent before the receivers start. With
	// HoldReceivers the receivers start only after the last failover, so
	// that every failover happens with a queue at least that deep (it
	// only grows meanwhile); otherwise they drain it under the failovers.
	Backlog       int
	HoldReceivers bool

	ReadyTimeout time.Duration // a new leader must acknowledge a send by then
	DrainTimeout time.Duration // the drain gives up after this long without a delivery

	// Raft timing of the nodes (their --raft-tick, --raft-election-ticks);
	// zero means omnibus's defaults.
	Tick          time.Duration
	ElectionTicks int

	// Sessions, with Groups, adds a partitioned queue that requires
	// sessions, sent to in that many sessions (sessions.go).
	Sessions int

	// MaxFailover fails the run when a failover's first acknowledged
	// send comes later than this after the fault (0: reported only).
	MaxFailover time.Duration

	// Groups runs the cluster with that many data groups (omnibus
	// --groups): each node leads one, and a failover deposes each node
	// in turn, the meta group's leader among them (groups.go). 0: one
	// group, and a failover deposes its leader.
	Groups int
}

// Defaults of `make cluster-test`.
const (
	DefaultFailovers = 12
	DefaultMinUptime = time.Second
	DefaultMaxUptime = 3 * time.Second
)

// NewFlagSet returns the flags of `omnibus-tools cluster-soak`, bound to c.
func NewFlagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("omnibus-tools cluster-soak", flag.ContinueOnError)
	fs.StringVar(&c.Binary, "binary", "", "omnibus executable the nodes run (default: the omnibus beside omnibus-tools, else on PATH)")
	fs.StringVar(&c.Dir, "dir", "", "directory for the nodes' data, Config.json and logs (default: a temporary one)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temporary directory after a passing run (a failing run always keeps it)")
	fs.IntVar(&c.Failovers, "failovers", DefaultFailovers, "leaders to depose")
	fs.DurationVar(&c.MinUptime, "min-uptime", DefaultMinUptime, "shortest time under load before a failover")
	fs.DurationVar(&c.MaxUptime, "max-uptime", DefaultMaxUptime, "longest time under load before a failover")
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed (0: from the clock; the run prints it)")
	fs.StringVar(&c.Mode, "mode", "mixed", "how leaders are deposed: kill (SIGKILL) or mixed (SIGKILL, cutting off where network namespaces exist, and SIGSTOP, in turn)")
	fs.StringVar(&c.Netns, "netns", "auto", "network namespaces for the nodes: auto, on or off (loopback; a cut-off is then a SIGSTOP)")
	fs.IntVar(&c.Senders, "senders", 4, "SDK clients sending")
	fs.IntVar(&c.Inflight, "inflight", 16, "sends in flight per sender")
	fs.IntVar(&c.Receivers, "receivers", 4, "SDK clients receiving in peek-lock")
	fs.IntVar(&c.Prefetch, "prefetch", 50, "messages asked for per receive call")
	fs.IntVar(&c.Size, "size", 512, "payload bytes")
	fs.IntVar(&c.Backlog, "backlog", 0, "messages queued before the receivers start (failover with a deep queue)")
	fs.BoolVar(&c.HoldReceivers, "hold-receivers", false, "start the receivers only after the last failover, so every failover has at least --backlog messages queued")
	fs.DurationVar(&c.ReadyTimeout, "ready-timeout", time.Minute, "a failover must end with an acknowledged send within this")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", time.Minute, "the drain gives up after this long without a delivery")
	fs.DurationVar(&c.Tick, "raft-tick", 0, "the nodes' --raft-tick (0: omnibus's default)")
	fs.IntVar(&c.ElectionTicks, "raft-election-ticks", 0, "the nodes' --raft-election-ticks (0: omnibus's default)")
	fs.DurationVar(&c.MaxFailover, "max-failover", 0, "fail the run when a failover's first acknowledged send comes later than this after the fault (0: the summary reports those over 3 s only)")
	fs.IntVar(&c.Sessions, "sessions", 0, "with --groups: also send in this many sessions to a partitioned queue that requires sessions, received by one session receiver (0: none)")
	fs.IntVar(&c.Groups, "groups", 0, "data groups (omnibus --groups): the nodes are deposed in turn, the meta leader among them (0: one group, its leader deposed)")
	return fs
}

var errUsage = errors.New("cluster soak: usage")

// IsUsage reports whether err is a configuration error.
func IsUsage(err error) bool { return errors.Is(err, errUsage) }

func (c *Config) validate() error {
	if c.Binary == "" {
		return fmt.Errorf("%w: no omnibus binary", errUsage)
	}
	if c.Failovers < 0 || c.Senders < 1 || c.Inflight < 1 || c.Receivers < 1 || c.Prefetch < 1 {
		return fmt.Errorf("%w: --failovers must be >= 0, --senders, --inflight, --receivers, --prefetch >= 1", errUsage)
	}
	if c.MinUptime <= 0 || c.MaxUptime < c.MinUptime {
		return fmt.Errorf("%w: need 0 < --min-uptime <= --max-uptime", errUsage)
	}
	switch c.Mode {
	case "kill", "mixed":
	default:
		return fmt.Errorf("%w: --mode %q: want kill or mixed", errUsage, c.Mode)
	}
	switch c.Netns {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("%w: --netns %q: want auto, on or off", errUsage, c.Netns)
	}
	if c.Groups < 0 {
		return fmt.Errorf("%w: --groups must be >= 0", errUsage)
	}
	if c.Size < 32 {
		c.Size = 32
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = time.Minute
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = time.Minute
	}
	return nil
}
