package raftstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Node is one member of a Raft group. Open starts it; while it leads the
// group it hands out a [Session], the store its broker runs on.
type Node struct {
	cfg   Config
	log   *zap.Logger
	id    uint64
	group uint64    // the Raft group (groups.go); 0: the meta group
	host  *host     // what the node's groups share
	nonce uint64    // drawn at each start: tells this process's entries apart
	base  time.Time // origin of the node's monotonic clock (mono)
	// voteHold: until then (mono), vote requests are dropped (see
	// DESIGN.md: a restarted node must not vote within a lease). Only the
	// loop reads and changes it once the node runs.
	voteHold int64

	tr     groupLink   // the node's transport, for this group
	client *Client     // to ask peers for their status
	logs   *groupLog   // written by the appender; its memory storage is safe for all
	state  *stateStore // written by the applier
	loop   loopState   // owned by the loop goroutine
	apl    applierState

	recvc   chan *frame // peers' frames that carry entries (MsgApp)
	ctlc    chan *frame // peers' other frames: acknowledgements, heartbeats, votes
	snapc   chan snapIn
	propc   chan struct{}          // a proposal was queued (capacity 1)
	inbox   *workQueue[func()]     // work for the loop: local responses, reports
	appendQ *workQueue[appendWork] // work for the appender
	applyQ  *workQueue[applyWork]  // work for the applier
	stopc   chan struct{}
	// closed when the loop, the appender and the applier have exited
	loopDone, appendDone, applyDone chan struct{}

	// Published for other goroutines.
	term, leader, applied, commit atomic.Uint64
	leaseUntil                    atomic.Int64 // mono; 0 = no lease
	leaseHigh                     atomic.Int64 // the latest leaseUntil ever held (mono)
	becameLeader                  atomic.Int64 // mono of the last election won
	snapshotsInstalled            atomic.Int64
	ctlDropped                    atomic.Int64  // control frames dropped: ctlc was full
	snapshotIndex, logBytes       atomic.Uint64 // the log's latest snapshot, entry bytes since
	compactPending                atomic.Bool   // a compaction is on its way to the appender
	// compactNow: a membership change was applied; compact (snapshot) at
	// once, so that the snapshot a new member gets names it.
	compactNow atomic.Bool
	stalled    atomic.Bool // a write of this node's disk is failing
	// appliedMoved: the channel AppliedMoved handed out, closed at the
	// next published applied position (applied.go).
	appliedMoved atomic.Pointer[chan struct{}]
	// applyUpTo: WaitApplied waits for this index; a follower holds no
	// applies while it has not applied it (hold.go).
	applyUpTo atomic.Uint64
	// heldDropped counts the operations coalescing took out of a
	// follower's held applies (coalesce.go).
	heldDropped atomic.Uint64
	// heldThrough is the last entry index a follower holds unapplied, 0
	// while it holds none (hold.go).
	heldThrough atomic.Uint64
	// votersPub is the group's voters as the loop last saw them, for
	// other goroutines (status, the balancer).
	votersPub, learnersPub atomic.Pointer[[]uint64]

	appliedMu               sync.Mutex // guards appliedIdx and appliedTerm
	appliedIdx, appliedTerm uint64

	snapMu   sync.Mutex        // guards snapDirs
	snapDirs map[uint64]string // checkpoints raft took, by snapshot index, until installed

	echoMu sync.Mutex // guards echo
	echo   echoState

	mu sync.Mutex // guards the fields below
	// changed is closed (and replaced) whenever sess, canServe, leader or
	// closed change, or the node stalls.
	changed    chan struct{}
	sess       *Session
	canServe   bool
	draining   bool // a hand-over drains the Session: it takes no new batch (balance.go)
	fenceAgain bool // a session ended: the loop must set a new fence index
	queue      []*proposal
	queueBytes int
	space      chan struct{}        // closed (and replaced) when the queue shrinks
	waiting    map[uint64]*proposal // by sequence number, proposed to raft
	nextSeq    uint64
	closed     bool
	failed     error // the loop stopped on an error it cannot survive
	clientInfo map[string]string
}

// echoState is the latest leader frame that reset this node's election
// timer: echoed back to that leader in the next frame to it.
type echoState struct {
	lead, term uint64
	sent       int64
}

// snapIn is a snapshot received by the transport, waiting for the loop.
type snapIn struct {
	m   pb.Message
	dir string
}

// Open opens (creating if needed) the node's directory, starts its
// transport and the loops of its groups (groups.go), and returns its
// member of the meta group, through which the others are reached
// (Groups, GroupNode) and which closes them all. A new directory
// bootstraps the meta group from cfg.Peers, unless cfg.Join, and, with
// cfg.Groups, the data groups this node holds.
func Open(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: %w: %v", storage.ErrUnavailable, err)
	}
	_, statErr := os.Stat(filepath.Join(cfg.Dir, groupsFile))
	rec, err := loadGroups(cfg.Dir, cfg.Groups, cfg.Peers, cfg.Join)
	if err != nil {
		return nil, err
	}
	h := &host{id: cfg.ID, cfg: cfg, nodes: map[uint64]*Node{}, record: rec, changed: make(chan struct{}),
		quit: make(chan struct{}), firstStart: errors.Is(statErr, os.ErrNotExist)}
	h.tr = cfg.transport
	if h.tr == nil {
		ht := newHTTPTransport(cfg.ID, cfg.ListenAddr, cfg.Listener, peerSecurity{creds: cfg.TLS, admin: cfg.Admin}, cfg.Logger.Named("transport"))
		ht.protocols = cfg.PeerProtocols
		h.tr = ht
	}
	var opened []*Node
	closeOpened := func() {
		for _, n := range opened {
			n.logs.close()
			n.state.close()
		}
		h.closeGroupLogs()
	}
	meta, err := openGroup(cfg, h, 0)
	if err != nil {
		return nil, err
	}
	opened = append(opened, meta)
	gcs, gs, err := h.groupsAtStart(meta)
	if err != nil {
		closeOpened()
		return nil, err
	}
	for i, gc := range gcs {
		if err := os.MkdirAll(gc.Dir, 0o755); err != nil {
			closeOpened()
			return nil, fmt.Errorf("raftstore: %w: %v", storage.ErrUnavailable, err)
		}
		n, err := openGroup(gc, h, gs[i])
		if err != nil {
			closeOpened()
			return nil, fmt.Errorf("raftstore: group %d: %w", gs[i], err)
		}
		opened = append(opened, n)
	}
	if err := h.dropUnclaimedLogs(); err != nil {
		closeOpened()
		return nil, err
	}
	for _, n := range opened {
		h.nodes[n.group] = n
		for id, addr := range n.loop.peers {
			if id != n.id {
				n.tr.setPeer(id, addr)
			}
		}
	}
	if err := h.tr.start(h); err != nil {
		closeOpened()
		return nil, err
	}
	for _, n := range opened {
		n.start()
	}
	h.loops.Go(func() { h.balance(h.quit, balanceEvery) })
	h.loops.Go(func() { h.placeLoop(h.quit) })
	return meta, nil
}

// start starts the node's goroutines.
func (n *Node) start() {
	go n.run()
	go n.runAppender()
	go n.runApplier()
	go n.watchLease()
}

// openGroup opens this node's member of group g in cfg.Dir, bootstrapping
// it from cfg.Peers if the directory is new (unless cfg.Join). It starts
// no goroutine.
func openGroup(cfg Config, h *host, g uint64) (*Node, error) {
	log := cfg.Logger
	if g != 0 {
		log = log.With(zap.Uint64("group", g))
	}
	n := &Node{cfg: cfg, log: log, id: cfg.ID, group: g, host: h, tr: groupLink{tr: h.tr, group: g}, base: time.Now(),
		recvc: make(chan *frame, maxInflight), ctlc: make(chan *frame, ctlFrames), snapc: make(chan snapIn), propc: make(chan struct{}, 1),
		inbox: newWorkQueue[func()](), appendQ: newWorkQueue[appendWork](), applyQ: newWorkQueue[applyWork](),
		stopc: make(chan struct{}), loopDone: make(chan struct{}), appendDone: make(chan struct{}),
		applyDone: make(chan struct{}), snapDirs: map[uint64]string{},
		changed: make(chan struct{}), space: make(chan struct{}), waiting: map[uint64]*proposal{}, nextSeq: 1}
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	n.nonce = binary.LittleEndian.Uint64(nb[:])
	n.voteHold = int64(time.Duration(cfg.ElectionTicks) * cfg.TickInterval)

	sopts := cfg.Store
	sopts.Logger = log.Named("pebble")
	// The Raft log is the durable copy of what the state database holds:
	// after a crash the node replays the log from the database's last
	// flush, so the database writes no write-ahead log of its own.
	sopts.NoWAL = true
	logs, fresh, err := h.openGroupLog(cfg, g, logOptions{fs: cfg.logFS,
		repair: cfg.Store.Repair, log: log.Named("log"), segmentBytes: cfg.segmentBytes})
	if err != nil {
		return nil, err
	}
	n.logs = logs
	n.state, err = openStateStore(cfg.Dir, sopts)
	if err != nil {
		logs.close()
		return nil, err
	}
	err = n.initApplier()
	if err == nil {
		if err = n.checkRestoredStart(fresh); err != nil {
			// The log this start created holds nothing: leave the
			// directory as it was, for a start as the only member.
			logs.discard()
			n.state.close()
			return nil, err
		}
		err = n.initLoop(fresh)
	}
	if err != nil {
		logs.close()
		n.state.close()
		return nil, err
	}
	n.client = NewClient(cfg.TLS, nil)
	return n, nil
}

// initApplier reads where the state database and the log stand.
func (n *Node) initApplier() error {
	a := &n.apl
	snap, err := n.logs.mem.Snapshot()
	if err != nil {
		return err
	}
	n.snapshotIndex.Store(snap.Metadata.Index)
	if a.stateApplied, a.stateTerm, err = n.state.applied(); err != nil {
		return err
	}
	if a.stateApplied < snap.Metadata.Index {
		return fmt.Errorf("raftstore: %w: the state database is at index %d, behind the log's snapshot at %d",
			storage.ErrCorrupt, a.stateApplied, snap.Metadata.Index)
	}
	// Raft hands out again what follows the snapshot; the applier skips
	// what the state database already holds.
	a.applied, a.appliedTerm = snap.Metadata.Index, snap.Metadata.Term
	n.setApplied(a.applied, a.appliedTerm)
	return nil
}

// mono is the node's monotonic clock, in nanoseconds since Open.
func (n *Node) mono() int64 { return int64(time.Since(n.base)) }

// ID is the node's id.
func (n *Node) ID() uint64 { return n.id }

// PeerAddr is the address the peer transport listens on.
func (n *Node) PeerAddr() string { return n.tr.addr() }

// PeerClient is a [Client] with this node's credentials (no Manage key:
// status only).
func (n *Node) PeerClient() *Client { return n.client }

// Leader is the id of the leader this node knows of, 0 if none.
func (n *Node) Leader() uint64 { return n.leader.Load() }

// Term is the node's current Raft term.
func (n *Node) Term() uint64 { return n.term.Load() }

// Changed returns a channel closed at the next change of leader, of the
// node's ability to serve, or of its Session, or when it stalls on its
// disk.
func (n *Node) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// broadcastLocked wakes everyone waiting on Changed.
func (n *Node) broadcastLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// SetClientInfo publishes what this node tells its peers about itself
// (the addresses of its client listeners, by name), so that followers
// can proxy clients to it when it leads.
func (n *Node) SetClientInfo(info map[string]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.clientInfo = info
}

func (n *Node) clientInfoCopy() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]string, len(n.clientInfo))
	for k, v := range n.clientInfo {
		out[k] = v
	}
	return out
}

// Close ends the node's Session (its calls then fail with
// storage.ErrClosed), stops the loop and closes both databases; the meta
// group's member (what Open returns) closes every other group first, and
// the transport last. A second Close returns storage.ErrClosed.
func (n *Node) Close() error {
	if n.group != 0 {
		return n.closeGroup()
	}
	n.host.quitOnce.Do(func() { close(n.host.quit) })
	n.host.loops.Wait() // no group opens or closes from now on
	var errs []error
	for _, g := range n.host.all() {
		if g.group != 0 {
			n.host.mu.Lock()
			delete(n.host.nodes, g.group) // its frames are dropped from now on
			n.host.mu.Unlock()
			if err := g.closeGroup(); err != nil && !errors.Is(err, storage.ErrClosed) {
				errs = append(errs, fmt.Errorf("group %d: %w", g.group, err))
			}
		}
	}
	if err := n.host.closeGroupLogs(); err != nil {
		errs = append(errs, fmt.Errorf("the data groups' log: %w", err))
	}
	err := n.closeGroup()
	if errors.Is(err, storage.ErrClosed) {
		return err
	}
	return errors.Join(append(errs, err, n.host.tr.close())...)
}

// closeGroup is Close of one group's member, the transport left alone.
func (n *Node) closeGroup() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return storage.ErrClosed
	}
	n.closed = true
	if n.sess != nil {
		n.endSessionLocked(n.sess, storage.ErrClosed)
	}
	n.failQueueLocked(storage.ErrClosed)
	n.broadcastLocked()
	n.mu.Unlock()
	close(n.stopc)
	<-n.loopDone
	<-n.appendDone
	<-n.applyDone
	n.client.CloseIdleConnections()
	return errors.Join(n.state.close(), n.logs.close())
}

// fail stops the node after an error it cannot survive (raft's
// invariants broken by damaged data, say): the process goes on, the node
// serves nothing and reports the error in its status.
func (n *Node) fail(err error) {
	n.log.Error("raft node stopped", zap.Error(err))
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failed == nil {
		n.failed = err
	}
	if n.sess != nil {
		n.endSessionLocked(n.sess, fmt.Errorf("%w: raftstore: node failed: %v", storage.ErrUnavailable, err))
	}
	n.canServe = false
	n.broadcastLocked()
}

// maxInflight is how many MsgApps raft sends a follower ahead of its
// acknowledgements, and so how many frames of entries a group holds for
// its loop.
const maxInflight = 256

// ctlFrames is how many control frames a group holds for its loop.
const ctlFrames = 256

// receive implements handler. A peer's stream carries the frames of every
// group the two nodes share, so a group that cannot take a frame must not
// hold up the others' behind it. A frame of entries waits for room in
// recvc: back-pressure on the entries' stream, which raft's own flow
// control (maxInflight) bounds. Any other frame (an acknowledgement,
// a heartbeat, a vote) goes to ctlc, or is dropped when ctlc is full, as
// a lossy network would (raft sends them again), so that one group's loop
// falling behind never keeps another group's leader from hearing its
// followers and renewing its lease.
func (n *Node) receive(f *frame) bool {
	if !carriesEntries(f) {
		select {
		case <-n.stopc:
			return false
		case n.ctlc <- f:
		default:
			n.ctlDropped.Add(1)
		}
		return true
	}
	select {
	case n.recvc <- f:
		return true
	case <-n.stopc:
		return false
	}
}

// carriesEntries reports whether f holds a MsgApp (the app lane's kind).
func carriesEntries(f *frame) bool {
	for i := range f.msgs {
		if f.msgs[i].Type == pb.MsgApp {
			return true
		}
	}
	return false
}

// receiveSnapshot implements handler.
func (n *Node) receiveSnapshot(m pb.Message, dir string) error {
	select {
	case n.snapc <- snapIn{m: m, dir: dir}:
		return nil
	case <-n.stopc:
		return storage.ErrClosed
	}
}

// snapScratchPrefix starts the names of snapshot directories in transit.
const snapScratchPrefix = "snap-"

// newScratch implements handler.
func (n *Node) newScratch(kind string) (string, error) {
	return os.MkdirTemp(n.cfg.Dir, snapScratchPrefix+kind+"-")
}

// unreachable implements handler.
func (n *Node) unreachable(id uint64) {
	n.runOnLoop(func() { n.loop.rn.ReportUnreachable(id) })
}

// gone implements handler. A leader whose process is gone (its peer port
// refuses connections) holds no lease any more: it cannot serve. So this
// follower forgets it at once, which lets it grant pre-votes without
// waiting out the election timeout (raft's ForgetLeader, meant for such
// an external failure detector), and campaigns after a random part of
// half an election timeout, unless someone else was faster. A leader
// that is only cut off refuses nothing (the dial times out): it keeps its
// lease and the usual timeouts apply.
func (n *Node) gone(id uint64) {
	n.runOnLoop(func() {
		l := &n.loop
		st := l.rn.BasicStatus()
		if st.RaftState != raft.StateFollower || st.Lead != id {
			return
		}
		if err := l.rn.ForgetLeader(); err != nil {
			return
		}
		// The vote hold protects the lease of a leader this node may have
		// acknowledged before it restarted; following a live leader since
		// proves that lease over, and that leader is now dead.
		n.voteHold = 0
		n.log.Info("the leader's process is gone (connection refused): electing without waiting out its timeout",
			zap.Uint64("leader", id), zap.Uint64("term", st.Term))
		jitter := time.Duration(mrand.Int64N(int64(time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval/2) + 1))
		time.AfterFunc(jitter, func() {
			n.runOnLoop(func() {
				if st := l.rn.BasicStatus(); st.RaftState == raft.StateFollower && st.Lead == raft.None {
					_ = l.rn.Campaign()
				}
			})
		})
	})
}

// runOnLoop has fn run on the loop, soon. It never blocks.
func (n *Node) runOnLoop(fn func()) { n.inbox.push(fn) }

// retry runs fn until it succeeds, backing off, and logs while it fails.
// A disk fault stalls the node instead of ending the process: while it
// lasts the node sends nothing to its peers (a leader must not look
// alive, and keep its lease, while it cannot commit) and serves nothing.
// It returns false if the node stops first.
func (n *Node) retry(what string, fn func() error) bool {
	wait := 10 * time.Millisecond
	for failures := 0; ; failures++ {
		err := fn()
		if err == nil {
			if failures > 0 {
				n.stalled.Store(false)
				n.log.Info("raft node writes again", zap.String("what", what))
			}
			return true
		}
		if errors.Is(err, storage.ErrCorrupt) {
			panic(err.Error())
		}
		if failures == 0 {
			n.stalled.Store(true)
			n.mu.Lock()
			n.broadcastLocked() // watchLease ends the Session
			n.mu.Unlock()
			n.log.Warn("raft node cannot write; retrying", zap.String("what", what), zap.Error(err))
		}
		select {
		case <-n.stopc:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// stamp implements handler: the lease fields of a frame to peer f.to.
func (n *Node) stamp(f *frame) {
	f.sent = n.mono()
	n.echoMu.Lock()
	if n.echo.lead == f.to {
		f.echoTerm, f.echoSent = n.echo.term, n.echo.sent
	}
	n.echoMu.Unlock()
}

// raftLogger adapts zap to raft's Logger. Raft's Fatal and Panic report
// broken invariants: they panic, and the loop turns the panic into a
// failed node instead of an ended process.
type raftLogger struct{ s *zap.SugaredLogger }

func (l raftLogger) Debug(v ...any)                   { l.s.Debug(v...) }
func (l raftLogger) Debugf(format string, v ...any)   { l.s.Debugf(format, v...) }
func (l raftLogger) Error(v ...any)                   { l.s.Error(v...) }
func (l raftLogger) Errorf(format string, v ...any)   { l.s.Errorf(format, v...) }
func (l raftLogger) Info(v ...any)                    { l.s.Info(v...) }
func (l raftLogger) Infof(format string, v ...any)    { l.s.Infof(format, v...) }
func (l raftLogger) Warning(v ...any)                 { l.s.Warn(v...) }
func (l raftLogger) Warningf(format string, v ...any) { l.s.Warnf(format, v...) }
func (l raftLogger) Fatal(v ...any)                   { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }
func (l raftLogger) Panic(v ...any)                   { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }

var _ raft.Logger = raftLogger{}
