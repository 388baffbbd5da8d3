package app

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/cmd/omnibus/clusterrpc"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/emuconfig"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// A cluster with data groups (raftstore.Config.Groups; DESIGN.md,
// "Several Raft groups"). Every queue and topic (a topic with its
// subscriptions) lives in one data group, which the meta group's leader
// picks when it is created and records in the meta group
// (placement). Each node runs:
//
//   - a broker for each data group it leads, over that group's Session;
//   - one App whose fronts take every client connection this node
//     accepts, over a routed broker (core.Config.Router): each link and
//     each HTTP request is served where its entity's group is led, by
//     that broker in this process, or by a call on the leading node
//     (clusterrpc) over the connection the two keep on the peer port;
//   - the calls peers make on the groups it leads, and, while it leads
//     the meta group, the placement service;
//   - for each group it leads, the pumps that hand the messages its
//     entities forward to entities of other groups over to those groups
//     (transfers, cluster_transfer.go).
//
// A client stays connected to the node it reached, whoever leads what.

// rpcProtocol is the peer-port protocol of the calls between nodes.
const rpcProtocol = "omnibus-rpc/3" // 2: receive answers are acknowledged (opAck); 3: opTransfer

// placementPrefix starts the meta group's placement records: the
// lower-case name of a queue or topic, then its data group (8 bytes).
const placementPrefix = "P"

// routed is a node's part of a cluster with data groups.
type routed struct {
	cl   *Cluster
	meta *raftstore.Node
	log  *zap.Logger
	srv  *clusterrpc.Server

	// holdSync, set by tests, stops syncNamespacesLoop taking the meta
	// group's changes, so that this node's registry lags for certain.
	holdSync atomic.Bool

	mu       sync.Mutex                    // guards the fields below
	local    map[uint64]*localGroup        // the data groups this node serves now
	clients  map[uint64]*clusterrpc.Client // by node id
	home     *core.Broker                  // the routed broker, once the App started
	metaSess *raftstore.Session            // while this node leads the meta group
	config   *emuconfig.Config             // the config file, applied by the meta leader
	registry *namespace.Registry           // the routed App's namespaces, once it started

	placeMu sync.Mutex // serializes placements on the meta leader
	places  placeCache // what this node's meta replica says of each place

	// cfgState is the config file's digest and names, set by start before
	// anything is served; configDone is closed once the meta group says
	// the file is applied (cluster_configready.go).
	cfgState   configState
	configDone chan struct{}

	peers      peerLeaders           // the leaders of the groups this node does not hold
	peerStatus atomic.Int64          // status calls peerGroups made on other members
	calls      clusterrpc.CallCounts // the calls this node's clients made on the others

	// xferCounts counts the transfers this node handed over, for the
	// metrics (cluster_transfer_metrics.go).
	xferCounts transferCounts

	// loseTransferAnswers (tests only) makes this node's pumps act as if
	// every answer to a transfer they sent was lost: the target applied
	// it, the outbox keeps it (cluster_transfer.go).
	loseTransferAnswers atomic.Bool
}

// localGroup is a data group this node leads and serves.
type localGroup struct {
	b    *core.Broker // the default namespace's
	sess *raftstore.Session

	// spaces are the brokers of the other namespaces, each over its key
	// range of the Session (cluster_namespaces.go).
	spaces struct {
		sync.Mutex // guards the fields below
		by         map[uint64]*core.Broker
		stopPumps  map[uint64]context.CancelFunc // each one's outbox pumps
		dropped    map[uint64]bool               // namespaces dropped, not to be opened again (dropLocal)
		closed     bool
	}
}

func newRouted(cl *Cluster) *routed {
	r := &routed{cl: cl, log: cl.log.Named("routed"), local: map[uint64]*localGroup{}, clients: map[uint64]*clusterrpc.Client{},
		configDone: make(chan struct{})}
	r.srv = clusterrpc.NewServer(r.lookup, r.log)
	r.srv.Place = r.place
	r.srv.Meta = r.answerMeta
	return r
}

// serveConn is the peer-port handler of rpcProtocol.
func (r *routed) serveConn(conn net.Conn, br *bufio.Reader, from uint64) { r.srv.Serve(conn, br, from) }

// lookup implements clusterrpc.Lookup.
func (r *routed) lookup(g uint64) (clusterrpc.Group, bool) {
	g, ns := splitTarget(g)
	r.mu.Lock()
	lg := r.local[g]
	r.mu.Unlock()
	if lg == nil {
		return clusterrpc.Group{}, false
	}
	b, err := r.groupBroker(lg, g, ns)
	if err != nil {
		return clusterrpc.Group{}, false
	}
	return clusterrpc.Group{Broker: b, Valid: lg.sess.Valid}, true
}

// start runs the routed App on the node's listeners and serves the
// groups this node holds.
func (r *routed) start() error {
	cl := r.cl
	o := cl.opts
	o.Store = memstore.New() // the registry's brokers hold no entity: they live in the groups
	o.sharedNamespaces = sharedRegistry{r}
	// The config file's entities are created by the meta group's leader
	// once placements can be made (applyConfigLoop), not at start.
	if o.ConfigPath != "" {
		cfg, err := loadConfig(o.ConfigPath)
		if err != nil {
			return err
		}
		if r.cfgState, err = loadConfigState(o.ConfigPath, cfg); err != nil {
			return err
		}
		o.namespace, r.config = cfg.Namespace, cfg
		o.ConfigPath = ""
	}
	go r.watchConfigApplied()
	o.router = r.routerFor
	o.metricsSink = cl.metrics.sink()
	o.peerCalls = r.calls.Snapshot
	local := map[string]*chanListener{}
	for name, f := range cl.front {
		local[name] = newChanListener(f.l.Addr())
	}
	o.Listen = func(front, _ string) (net.Listener, error) {
		if l := local[front]; l != nil {
			return l, nil
		}
		return nil, fmt.Errorf("no %s listener in this cluster node", front)
	}
	a, err := Start(o)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.home, r.registry = a.Broker, a.Namespaces
	r.mu.Unlock()
	r.syncNamespaces(a.Namespaces)
	go r.syncNamespacesLoop(a.Namespaces)
	cl.mu.Lock()
	cl.serving = &servingState{app: a, local: local, always: true}
	cl.mu.Unlock()
	go r.serveMeta()
	go r.followGroups()
	return nil
}

// watchLeader fails the calls under way on data group gn's old leader as
// soon as this node sees another elected: that node may be frozen or cut
// off and never answer, and the clients' retries reach the new leader.
func (r *routed) watchLeader(gn *raftstore.Node) {
	g, last := gn.Group(), gn.Leader()
	for {
		select {
		case <-gn.Changed():
		case <-gn.Done(): // the group's replica moved away from this node
			return
		case <-r.cl.ctx.Done():
			return
		}
		now := gn.Leader()
		if now != last && last != 0 && last != r.meta.ID() {
			r.mu.Lock()
			c := r.clients[last]
			r.mu.Unlock()
			if c != nil {
				c.FailGroups(g, func(t uint64) bool { tg, _ := splitTarget(t); return tg == g })
			}
		}
		last = now
	}
}

// stop closes the routed App and the calls between nodes.
func (r *routed) stop(ctx context.Context) {
	r.cl.mu.Lock()
	st := r.cl.serving
	r.cl.serving = nil
	r.cl.mu.Unlock()
	if st != nil {
		for _, l := range st.local {
			l.cut()
		}
		_ = st.app.Shutdown(ctx)
	}
	r.srv.Close()
	r.mu.Lock()
	for _, c := range r.clients {
		c.Close()
	}
	r.mu.Unlock()
}

// serveGroup runs a broker over each Session of data group gn this node
// gets, one after the other.
func (r *routed) serveGroup(gn *raftstore.Node) {
	g := gn.Group()
	ctx := r.cl.ctx
	for {
		sess, err := gn.Session(ctx)
		if err != nil {
			return
		}
		start := time.Now()
		o := r.cl.opts
		b, err := core.New(core.Config{Store: sess, Clock: o.Clock, Logger: o.Logger.Named("core").With(zap.Uint64("group", g)),
			Namespace: r.namespace(), Faults: o.Faults, Limits: o.Limits, Stats: true, TxnTimeout: o.TxnTimeout,
			PartitionCount: o.PartitionCount, Deleted: func(ctx context.Context, name string) { r.deleted(ctx, name, g) },
			Transfers: r.transferConfig(g, 0)})
		if err != nil {
			r.log.Error("cannot serve a data group this node leads", zap.Uint64("group", g), zap.Error(err))
			sess.Close()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		lg := &localGroup{b: b, sess: sess}
		r.mu.Lock()
		r.local[g] = lg
		r.mu.Unlock()
		r.openSpaces(lg, g)
		r.log.Info("serving a data group", zap.Uint64("group", g), zap.Uint64("term", sess.Term()), zap.Duration("rebuild", time.Since(start)))
		pumpCtx, stopPumps := context.WithCancel(ctx)
		go r.pumpTransfers(pumpCtx, g, 0, b, sess.Valid)
		select {
		case <-sess.Done():
			r.log.Warn("stopped serving a data group: no longer its leader", zap.Uint64("group", g), zap.Error(sess.Err()))
		case <-ctx.Done():
		}
		stopPumps()
		r.mu.Lock()
		delete(r.local, g)
		r.mu.Unlock()
		lg.closeSpaces()
		b.Close()
		sess.Close()
		if ctx.Err() != nil {
			return
		}
	}
}

// serveMeta holds the meta group's Session while this node leads it: the
// placement service writes through it.
func (r *routed) serveMeta() {
	ctx := r.cl.ctx
	for {
		sess, err := r.meta.Session(ctx)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.metaSess = sess
		r.mu.Unlock()
		if r.config != nil {
			go r.applyConfigLoop(sess)
		}
		go r.finishDeletionsLoop(sess, sess.Done())
		select {
		case <-sess.Done():
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.metaSess = nil
		r.mu.Unlock()
		sess.Close()
		if ctx.Err() != nil {
			return
		}
	}
}

func (r *routed) namespace() string {
	if r.config != nil {
		return r.config.Namespace
	}
	return ""
}

// applyConfigLoop applies the config file's entities through the routed
// broker while sess, this node's leadership of the meta group, lasts,
// retrying until every group has a leader to take them: each new meta
// leader applies it, as each new leader of a single group does.
func (r *routed) applyConfigLoop(sess *raftstore.Session) {
	r.mu.Lock()
	home := r.home
	r.mu.Unlock()
	entities := r.config.Namespaces[0].Entities
	if gate := r.cl.copts.configGate; gate != nil {
		select {
		case <-gate:
		case <-sess.Done():
			return
		}
	}
	warned := ""
	for {
		err := r.placeForwardingTogether(r.cl.ctx, entities)
		if err == nil {
			err = applyConfig(home, entities)
		}
		if err == nil {
			err = r.applyConfigNamespaces(r.cl.ctx) // cluster_nsconfig.go
		}
		if err == nil {
			err = r.markConfigApplied(sess) // cluster_configready.go
		}
		if err == nil {
			r.log.Info("applied the config file")
			return
		}
		if errors.Is(err, core.ErrBadRequest) && err.Error() != warned {
			// Not a passing state (forwarding across groups, say): say so
			// once, and keep trying in case the entities change.
			warned = err.Error()
			r.log.Warn("the config file cannot be applied as it is; retrying", zap.Error(err))
		} else {
			r.log.Debug("applying the config file; retrying", zap.Error(err))
		}
		select {
		case <-sess.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// placementKey is the meta group's record of name's group; name is
// qualified by its namespace (qualify) unless it is the default one's.
func placementKey(name string) []byte {
	if ns, n := unqualify(name); ns != 0 {
		return append(namespacePlacements(ns), strings.ToLower(n)...)
	}
	return []byte(placementPrefix + strings.ToLower(name))
}

// place implements clusterrpc.Place on the meta leader.
func (r *routed) place(ctx context.Context, name string, suggest uint64, create bool) (uint64, error) {
	r.mu.Lock()
	sess := r.metaSess
	r.mu.Unlock()
	if sess == nil {
		return 0, &core.Error{Code: core.CodeServerBusy, Msg: "the meta group has no leader serving now (an election is under way); retry"}
	}
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	key := placementKey(name)
	if v, err := sess.Get(key); err == nil && len(v) == 8 {
		return binary.BigEndian.Uint64(v), nil
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return 0, &core.Error{Code: core.CodeServerBusy, Msg: "reading the placement: " + err.Error()}
	}
	if !create {
		return 0, nil
	}
	if err := namespaceLive(sess, name); err != nil {
		return 0, err
	}
	if err := r.checkEntityCount(sess, name); err != nil {
		return 0, err
	}
	g := suggest
	if g == 0 || g > uint64(r.meta.DataGroups()) {
		g = r.leastPlaced(sess)
	}
	b := &storage.Batch{Sync: true}
	b.Set(key, binary.BigEndian.AppendUint64(nil, g))
	if err := sess.Apply(b); err != nil {
		return 0, &core.Error{Code: core.CodeServerBusy, Msg: "recording the placement: " + err.Error()}
	}
	r.log.Info("placed a queue or topic", zap.String("name", displayName(name)), zap.Uint64("group", g))
	return g, nil
}

// leastPlaced is the data group with the fewest queues and topics placed
// in it (the lowest number among equals).
func (r *routed) leastPlaced(sess *raftstore.Session) uint64 {
	n := r.meta.DataGroups()
	counts := make([]int, n+1)
	_ = sess.Scan([]byte(placementPrefix), nil, func(_, v []byte) (bool, error) {
		if len(v) == 8 {
			if g := binary.BigEndian.Uint64(v); g >= 1 && g <= uint64(n) {
				counts[g]++
			}
		}
		return true, nil
	})
	best := uint64(1)
	for g := 2; g <= n; g++ {
		if counts[g] < counts[best] {
			best = uint64(g)
		}
	}
	return best
}

// groupOf returns the data group of the queue or topic name: from this
// node's copy of the meta group, else from the meta leader (which
// records one when create is set); 0 when it has none.
func (r *routed) groupOf(ctx context.Context, name string, create bool) (uint64, error) {
	return r.groupOrPlace(ctx, name, 0, create)
}

// groupOrPlace is groupOf, the meta leader recording suggest (when not
// 0) if it places name now.
func (r *routed) groupOrPlace(ctx context.Context, name string, suggest uint64, create bool) (uint64, error) {
	if p, ok := r.placeOf(name); ok {
		return p.group, nil
	}
	leader := r.meta.Leader()
	switch {
	case leader == 0:
		return 0, &core.Error{Code: core.CodeServerBusy, Msg: "the meta group has no leader now (an election is under way); retry"}
	case leader == r.meta.ID():
		return r.place(ctx, name, suggest, create)
	}
	c, err := r.client(leader)
	if err != nil {
		return 0, err
	}
	return c.Place(ctx, name, suggest, create)
}

// client returns the connection to node id.
func (r *routed) client(id uint64) (*clusterrpc.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[id]; c != nil {
		return c, nil
	}
	c := clusterrpc.NewClient(func(ctx context.Context) (net.Conn, *bufio.Reader, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return r.meta.DialPeer(ctx, id, rpcProtocol)
	}, r.log.With(zap.Uint64("peer", id)))
	c.Counts = &r.calls
	r.clients[id] = c
	return c, nil
}

// backend returns data group g's backend: its broker when this node
// serves it, else a stand-in calling the node that leads it.
func (r *routed) backend(g uint64) (core.Backend, error) {
	r.mu.Lock()
	home := r.home
	r.mu.Unlock()
	return r.backendIn(g, 0, home)
}

// backendIn is backend for namespace ns (0: the default one), whose
// routed broker is home.
func (r *routed) backendIn(g, ns uint64, home *core.Broker) (core.Backend, error) {
	r.mu.Lock()
	lg := r.local[g]
	r.mu.Unlock()
	if lg != nil {
		b, err := r.groupBroker(lg, g, ns)
		if err != nil {
			return nil, err
		}
		return fencedBackend{b: b, valid: lg.sess.Valid}, nil
	}
	leader := r.leaderOf(g)
	if leader == 0 || leader == r.meta.ID() {
		// No leader, or this node was just elected and is not serving yet.
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: fmt.Sprintf("the entity's group (%d) is changing leaders; retry", g)}
	}
	c, err := r.client(leader)
	if err != nil {
		return nil, err
	}
	return clusterrpc.NewBackend(c, groupTarget(g, ns), home), nil
}

// leaderOf is the leader of data group g this node knows of (0: none).
func (r *routed) leaderOf(g uint64) uint64 {
	if gn := r.meta.GroupNode(g); gn != nil {
		return gn.Leader()
	}
	return r.peerLeader(g) // cluster_peerleaders.go
}

// peerGroups is what the members say of the data groups this node does
// not hold (asked of each in turn, until one answers).
func (r *routed) peerGroups() []raftstore.GroupSummary {
	st := r.meta.Status()
	var out []raftstore.GroupSummary
	seen := map[uint64]bool{}
	for _, m := range st.Members {
		if m.ID == r.meta.ID() || m.Addr == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(r.cl.ctx, time.Second)
		r.peerStatus.Add(1)
		pst, err := r.meta.PeerClient().Status(ctx, m.Addr)
		cancel()
		if err != nil {
			continue
		}
		for _, gs := range pst.Groups {
			if !seen[gs.Group] && gs.Leader != 0 {
				seen[gs.Group] = true
				out = append(out, gs)
			}
		}
	}
	return out
}

// Route implements core.Router.
func (r *routed) Route(name string) (core.Backend, error) {
	g, err := r.groupOf(r.cl.ctx, name, false)
	if err != nil {
		return nil, err
	}
	if g == 0 {
		if r.configPending(name) {
			return nil, errConfigPending(name)
		}
		return nil, &core.Error{Code: core.CodeNotFound, Msg: fmt.Sprintf("The messaging entity '%s' could not be found.", name)}
	}
	be, err := r.backend(g)
	return r.pendingIfConfig(be, err, name)
}

// Place implements core.Router.
func (r *routed) Place(ctx context.Context, name string) (core.Backend, error) {
	g, err := r.groupOf(ctx, name, true)
	if err != nil {
		return nil, err
	}
	return r.placedBackend(name, g)
}

// Group implements core.GroupRouter.
func (r *routed) Group(ctx context.Context, name string) (uint64, error) {
	return r.groupOf(ctx, name, false)
}

// PlaceIn implements core.GroupRouter: name goes where what it forwards
// to is (g), when it has no place yet.
func (r *routed) PlaceIn(ctx context.Context, name string, g uint64) (core.Backend, error) {
	g, err := r.groupOrPlace(ctx, name, g, true)
	if err != nil {
		return nil, err
	}
	return r.placedBackend(name, g)
}

// All implements core.Router.
func (r *routed) All() ([]core.Backend, error) {
	var out []core.Backend
	for g := uint64(1); g <= uint64(r.meta.DataGroups()); g++ {
		be, err := r.backend(g)
		if err != nil {
			return nil, err
		}
		out = append(out, be)
	}
	return out, nil
}

// Local implements core.Router.
func (r *routed) Local() []core.Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.Backend
	for _, lg := range r.local {
		out = append(out, lg.b)
	}
	return out
}

var _ core.GroupRouter = (*routed)(nil)
