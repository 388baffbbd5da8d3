package raftstore

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// Defaults for [Config].
const (
	// DefaultTickInterval is the length of one Raft tick.
	DefaultTickInterval = 100 * time.Millisecond
	// DefaultElectionTicks is the election timeout in ticks (randomized by
	// raft between it and twice it). With the default tick: 1 to 2 s.
	DefaultElectionTicks = 10
	// DefaultMaxPendingBytes bounds the batches queued for proposal; Apply
	// waits while the queue is full.
	DefaultMaxPendingBytes = 64 << 20
	// DefaultMaxEntryBytes is how many bytes of batches one Raft entry
	// gathers (a larger batch goes alone).
	DefaultMaxEntryBytes = 4 << 20
	// DefaultSnapshotEntries and DefaultSnapshotBytes say when the log is
	// compacted: once it holds this many entries, or bytes, past the last
	// snapshot.
	DefaultSnapshotEntries = 10000
	DefaultSnapshotBytes   = 64 << 20
	// DefaultProxyWait is how long a follower holds a client connection
	// while no leader is known, before closing it.
	DefaultProxyWait = 10 * time.Second
)

// MaxGroups bounds Config.Groups.
const MaxGroups = 64

// MaxBatchBytes is the largest batch (encoded) a [Session] applies: a
// 100 MiB message, Service Bus's largest, with its keys. A larger batch (a
// transaction of several large messages) is refused before it is
// proposed: no follower would take the entry.
const MaxBatchBytes = 104 << 20

// Bounds that are not configurable.
const (
	maxUncommittedBytes = 256 << 20 // raft's MaxUncommittedEntriesSize
	maxMsgBytes         = 1 << 20   // raft's MaxSizePerMsg for appends
	// maxFrameBytes bounds one frame on a peer stream, at what Raft
	// needs: a lane gathers messages into a frame while it holds less
	// than laneFrameBytes, and the last message is at most maxMsgBytes of
	// entries or one larger entry; an entry is at most MaxEntryBytes of
	// batches, or a single larger batch, at most MaxBatchBytes. So
	// 112 MiB (it was 128 MiB). A frame is read as its bytes arrive, not
	// allocated whole from its length.
	maxFrameBytes  = MaxBatchBytes + 2*laneFrameBytes
	laneFrameBytes = 4 * maxMsgBytes
	sendQueueLen   = 4096    // messages queued per peer
	catchUpEntries = 1000    // entries kept behind a snapshot for slow followers
	catchUpBytes   = 8 << 20 // and at most this many bytes of them
	// laggingBytes: a leader keeps its log back to its slowest
	// follower's match, up to this many bytes, so that a follower cut off
	// for a few seconds catches up from the log rather than from a
	// snapshot of the whole state database (append.go, compactLog).
	laggingBytes = 32 << 20
)

// Config configures a [Node].
type Config struct {
	// ID is this node's id in the group, > 0. Ids are never reused.
	ID uint64
	// Peers maps the id of every initial member (this one included) to
	// its peer transport address, host:port. Every member of a new group
	// must be started with the same Peers.
	Peers map[uint64]string
	// Join starts a node that is not an initial member: it does not
	// bootstrap and waits for the leader to add it.
	Join bool
	// Groups is how many data groups a new cluster has besides the meta
	// group (groups.go): 0 keeps everything in the meta group. It is
	// recorded at the first start; later starts keep what was recorded.
	Groups int
	// ReplaceAfter is how long a member may be out of the meta leader's
	// reach before the meta leader moves its data group replicas to
	// other nodes (replicas.go): zero means DefaultReplaceAfter, a
	// negative value never (a member removed from the cluster is
	// replaced at once whatever it says).
	ReplaceAfter time.Duration
	// Dir holds the node's Raft log (segment files) and state database.
	Dir string
	// ListenAddr is where the peer transport listens; "" means
	// Peers[ID]. ":0" picks a port (see Node.PeerAddr).
	ListenAddr string
	// Listener, when set, is the peer transport's listener, already
	// open (ListenAddr is then ignored). The node closes it.
	Listener net.Listener
	// TLS are the node's credentials on the peer port (peertls.Load):
	// every connection is mutual TLS with certificates of the cluster's
	// CA, and each peer must present the certificate of the node it says
	// it is. Nil runs the peer port on plain TCP, where anyone who can
	// reach it is a member; Insecure must then say so.
	TLS      *peertls.Creds
	Insecure bool
	// Admin checks, beyond the client certificate, requests that change
	// the cluster (membership, join tokens): the broker's Manage key. It
	// returns why it refuses. Nil refuses them all.
	Admin func(r *http.Request) error
	// PeerProtocols are the handlers of other protocols peers open
	// connections of on the peer port (DialPeer), by protocol name.
	PeerProtocols map[string]PeerHandler
	// Logger receives the node's and raft's messages; nil means none.
	Logger *zap.Logger
	// Store are the options of the state database (Logger is set from
	// Logger). Its Repair applies to the Raft log too: damage there is
	// cut instead of refused.
	Store pebblestore.Options

	// TickInterval and ElectionTicks set Raft's timing; zero means the
	// defaults. The lease is ElectionTicks-3 ticks.
	TickInterval  time.Duration
	ElectionTicks int
	// FollowerApplyDelay is how long a follower may hold committed
	// entries before applying them to its state database, so that a
	// message set and deleted meanwhile never reaches it (hold.go): zero
	// means DefaultFollowerApplyDelay, a negative value applies at once.
	FollowerApplyDelay time.Duration
	// MaxPendingBytes, MaxEntryBytes, SnapshotEntries and SnapshotBytes:
	// zero means the defaults above.
	MaxPendingBytes int
	MaxEntryBytes   int
	SnapshotEntries uint64
	SnapshotBytes   uint64

	// transport replaces the network transport (tests use an in-memory
	// network).
	transport transport
	// moveStep, when set, is asked before each membership change of a
	// replica move (step "learner", "promote" or "remove" of group g);
	// false holds the move there (tests).
	moveStep func(g uint64, step string) bool
	// catchUp overrides catchUpEntries (tests).
	catchUp uint64
	// lagging overrides laggingBytes; negative keeps nothing for a
	// lagging follower beyond the catch-up margin (tests of snapshots).
	lagging int64
	// logFS replaces the file system of the Raft log (tests inject
	// faults); segmentBytes overrides DefaultSegmentBytes (tests).
	logFS        logFS
	segmentBytes int64
}

func (c *Config) setDefaults() error {
	if c.ID == 0 {
		return errors.New("raftstore: node id must be > 0")
	}
	if c.Dir == "" {
		return errors.New("raftstore: no directory")
	}
	if c.TLS == nil && !c.Insecure && c.transport == nil {
		return errors.New("raftstore: no peer TLS credentials (Config.TLS); plain TCP only with Config.Insecure")
	}
	if c.TLS != nil && c.TLS.ID != c.ID {
		return fmt.Errorf("raftstore: the peer certificate names node %d, not %d", c.TLS.ID, c.ID)
	}
	if !c.Join {
		if _, ok := c.Peers[c.ID]; !ok {
			return fmt.Errorf("raftstore: node %d is not in its peer list", c.ID)
		}
	}
	for id := range c.Peers {
		if id == 0 {
			return errors.New("raftstore: peer id 0")
		}
	}
	if c.Groups < 0 || c.Groups > MaxGroups {
		return fmt.Errorf("raftstore: %d data groups: 0 to %d", c.Groups, MaxGroups)
	}
	if c.ListenAddr == "" {
		c.ListenAddr = c.Peers[c.ID]
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.TickInterval <= 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.FollowerApplyDelay == 0 {
		c.FollowerApplyDelay = DefaultFollowerApplyDelay
	}
	if c.ElectionTicks < 5 {
		return fmt.Errorf("raftstore: ElectionTicks %d: at least 5 (the lease is ElectionTicks-3 ticks)", c.ElectionTicks)
	}
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.MaxPendingBytes, DefaultMaxPendingBytes)
	def(&c.MaxEntryBytes, DefaultMaxEntryBytes)
	if c.MaxEntryBytes > MaxBatchBytes {
		return fmt.Errorf("raftstore: MaxEntryBytes %d: at most MaxBatchBytes (%d), what a peer stream's frame is sized for", c.MaxEntryBytes, MaxBatchBytes)
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = DefaultSnapshotBytes
	}
	if c.ReplaceAfter == 0 {
		c.ReplaceAfter = DefaultReplaceAfter
	}
	if c.catchUp == 0 {
		c.catchUp = catchUpEntries
	}
	if c.lagging == 0 {
		c.lagging = laggingBytes
	}
	return nil
}

// lease is how long after a quorum's acknowledgement the leader may still
// act as the only leader: three ticks less than the shortest time in
// which any other node could grant a vote ((ElectionTicks-1) ticks after
// hearing from it).
func (c *Config) lease() time.Duration {
	return time.Duration(c.ElectionTicks-3) * c.TickInterval
}

// leaseMargin is what an election leaves between the end of a deposed
// leader's lease and the earliest vote another node may grant (two
// ticks): the time an answer checked against the lease just before it
// ended has to reach its client. A leadership transfer, whose campaign
// does not wait for the lease, waits this long after ending the Session.
func (c *Config) leaseMargin() time.Duration {
	return time.Duration(c.ElectionTicks-1)*c.TickInterval - c.lease()
}

// ParsePeers reads a peer list "1=host:port,2=host:port,...".
func ParsePeers(s string) (map[uint64]string, error) {
	peers := map[uint64]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idStr, addr, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("peer %q: want id=host:port", part)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(idStr), 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("peer %q: the id must be a number > 0", part)
		}
		addr = strings.TrimSpace(addr)
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %v", part, err)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("peer id %d listed twice", id)
		}
		peers[id] = addr
	}
	if len(peers) == 0 {
		return nil, errors.New("no peers")
	}
	return peers, nil
}

// FormatPeers is the inverse of [ParsePeers], in id order.
func FormatPeers(peers map[uint64]string) string {
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d=%s", id, peers[id])
	}
	return strings.Join(parts, ",")
}
