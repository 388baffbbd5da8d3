package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// ClusterOptions make an omnibus one node of a replicated group
// (storage/raftstore): the leader runs the broker, the others apply its
// log and proxy their clients to it.
type ClusterOptions struct {
	// NodeID is this node's id, > 0; ids are never reused.
	NodeID uint64
	// Peers maps every initial member's id to its peer address
	// (host:port of the peer transport); the same on every node.
	Peers map[uint64]string
	// Dir holds the node's Raft log and state; "" means <DataDir>/cluster.
	Dir string
	// Join starts a node that is not an initial member (see
	// storage/raftstore/DESIGN.md, Membership).
	Join bool
	// PeerListen is where the peer transport listens; "" means
	// Peers[NodeID].
	PeerListen string
	// ProxyWait bounds how long a follower holds a client connection
	// while no leader is known; 0 means raftstore.DefaultProxyWait.
	ProxyWait time.Duration
	// MaxProxied bounds the client connections a follower proxies at
	// once; 0 means DefaultMaxProxied.
	MaxProxied int
	// TickInterval and ElectionTicks set Raft's timing; zero means
	// raftstore's defaults (100 ms, 10 ticks).
	TickInterval  time.Duration
	ElectionTicks int
	// JoinToken, for a node without a peer certificate, gets it one from
	// the member that made the token (`omnibus cluster token`).
	JoinToken string
	// PeerInsecure runs the peer port on plain TCP, without certificates.
	PeerInsecure bool
	// Groups is how many data groups a new cluster spreads its queues and
	// topics over (raftstore.Config.Groups, cluster_routed.go); 0 keeps
	// them all in the one group, led by one node.
	Groups int
	// ReplaceAfter is how long a member may be out of reach before its
	// data group replicas move to other nodes (raftstore.Config.ReplaceAfter).
	ReplaceAfter time.Duration
	// FollowerApplyDelay is how long a follower may hold committed
	// entries before applying them (raftstore.Config.FollowerApplyDelay).
	FollowerApplyDelay time.Duration

	// configGate, set by tests, holds the meta leader's application of
	// the config file until it is closed (cluster_configready.go).
	configGate <-chan struct{}
}

// DefaultMaxProxied is the default of ClusterOptions.MaxProxied.
const DefaultMaxProxied = 10000

// frontNames are the client listeners a cluster keeps, in order.
var frontNames = []string{"amqp", "amqps", "http", "https"}

// Cluster is a running node of a replicated omnibus. Its client listeners
// stay open whatever its role: connections go to the local broker while
// this node leads, and are proxied to the leader otherwise.
type Cluster struct {
	opts  Options
	copts ClusterOptions
	log   *zap.Logger
	node  *raftstore.Node
	front map[string]*publicFront // the client listeners by name
	proxy *proxier
	// metrics serves /metrics when Options.MetricsAddr asks for it (nil
	// otherwise): the Raft node's always, the broker's while it leads.
	metrics *clusterMetrics
	// admin serves the admin socket (backups).
	admin *adminServer

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // the runner has stopped

	mu      sync.Mutex // guards serving
	serving *servingState
	// routed is this node's part of a cluster with data groups; nil when
	// the one group holds everything.
	routed *routed
}

// servingState is the local broker of one Session, or (always) the
// routed App of a cluster with data groups.
type servingState struct {
	sess   *raftstore.Session // nil with always
	app    *App
	local  map[string]*chanListener
	always bool // serves whatever the node's roles: its brokers fence themselves
}

// StartCluster opens the node's listeners and Raft node and starts
// serving or proxying, whichever its role. It does not wait to be
// elected.
func StartCluster(o Options, c ClusterOptions) (cl *Cluster, err error) {
	o.setDefaults()
	if o.Memory {
		return nil, errors.New("a cluster node keeps its data on disk: --memory cannot be used with --node-id")
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(o.DataDir, "cluster")
	}
	if c.ProxyWait <= 0 {
		c.ProxyWait = raftstore.DefaultProxyWait
	}
	if c.MaxProxied <= 0 {
		c.MaxProxied = DefaultMaxProxied
	}
	if err := checkClusterProtection(o, c); err != nil {
		return nil, err
	}
	o.knownHosts = append(o.knownHosts, peerHosts(c.Peers)...)
	ctx, cancel := context.WithCancel(context.Background())
	c0 := &Cluster{opts: o, copts: c, log: o.Logger.Named("cluster"), front: map[string]*publicFront{},
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	defer func() {
		if err != nil {
			cancel()
			c0.closeFronts()
			c0.metrics.close(context.Background())
			if c0.node != nil {
				c0.node.Close()
			}
		}
	}()
	cl = c0
	addrs := map[string]string{"amqp": o.AMQPAddr, "amqps": o.AMQPSAddr, "http": o.HTTPAddr, "https": o.HTTPSAddr}
	for _, name := range frontNames {
		if disabled(addrs[name]) {
			continue
		}
		l, err := net.Listen("tcp", addrs[name])
		if err != nil {
			return nil, fmt.Errorf("%s listener: %w", name, err)
		}
		cl.front[name] = &publicFront{name: name, l: l}
	}
	creds, err := peerCreds(c, cl.log)
	if err != nil {
		return nil, err
	}
	admin, err := manageCheck(o)
	if err != nil {
		return nil, err
	}
	cl.routed = newRouted(cl)
	cl.node, err = raftstore.Open(raftstore.Config{ID: c.NodeID, Peers: c.Peers, Join: c.Join, Dir: c.Dir,
		TLS: creds, Insecure: c.PeerInsecure, Admin: admin, Groups: c.Groups, ReplaceAfter: c.ReplaceAfter,
		FollowerApplyDelay: c.FollowerApplyDelay,
		PeerProtocols:      map[string]raftstore.PeerHandler{rpcProtocol: cl.routed.serveConn},
		ListenAddr:         c.PeerListen, Logger: o.Logger.Named("raft"), TickInterval: c.TickInterval, ElectionTicks: c.ElectionTicks,
		Store: pebblestore.Options{DiskReserve: o.DiskReserve, Repair: o.Repair}})
	if err != nil {
		return nil, fmt.Errorf("cluster node: %w", err)
	}
	cl.routed.meta = cl.node
	if cl.metrics, err = cl.startClusterMetrics(); err != nil {
		return nil, err
	}
	if cl.metrics != nil && cl.node.DataGroups() > 0 {
		cl.metrics.m.SetTransfers(cl.routed.transferMetrics)
	}
	cl.node.SetClientInfo(cl.advertised())
	cl.admin = startAdmin(o.DataDir, c.Dir, cl.backup, cl.log)
	cl.proxy = newProxier(cl)
	for _, f := range cl.front {
		go cl.accept(f)
	}
	go cl.run()
	go cl.proxy.watch()
	cl.log.Info("cluster node started", zap.Uint64("id", c.NodeID), zap.String("peers", raftstore.FormatPeers(c.Peers)),
		zap.String("peerAddr", cl.node.PeerAddr()), zap.String("dir", c.Dir))
	return cl, nil
}

// checkClusterProtection refuses a cluster spread over machines while
// protected mode (the publicly known key) would admit loopback clients
// only: the leader sees proxied clients coming from the other nodes.
func checkClusterProtection(o Options, c ClusterOptions) error {
	if o.Key != DefaultKey || o.AllowRemote {
		return nil
	}
	for id, addr := range c.Peers {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("peer %d: %v", id, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("peer %d is at %s, another machine, but omnibus runs with the publicly known "+
				"emulator key (protected mode, loopback clients only): set --key or --allow-remote", id, addr)
		}
	}
	return nil
}

// peerHosts are the host names of the peers' addresses: clients reach
// the cluster by them, and a follower passes their requests on to the
// leader as they are (see hosts.go).
func peerHosts(peers map[uint64]string) []string {
	var hosts []string
	for _, addr := range peers {
		if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// advertised is what the node tells its peers about its client
// listeners: the address a follower's proxy dials.
func (cl *Cluster) advertised() map[string]string {
	host, _, _ := net.SplitHostPort(cl.copts.Peers[cl.copts.NodeID])
	info := map[string]string{}
	for name, f := range cl.front {
		h, port, _ := net.SplitHostPort(f.l.Addr().String())
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() && host != "" {
			h = host
		}
		info[name] = net.JoinHostPort(h, port)
	}
	return info
}

// run serves every Session this node gets, one after the other; in a
// cluster with data groups, the routed App until the node stops.
func (cl *Cluster) run() {
	defer close(cl.done)
	if cl.node.DataGroups() > 0 {
		if err := cl.routed.start(); err != nil {
			cl.log.Error("cannot serve clients", zap.Error(err))
			return
		}
		<-cl.ctx.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cl.routed.stop(ctx)
		return
	}
	for {
		sess, err := cl.node.Session(cl.ctx)
		if err != nil {
			return
		}
		cl.serve(sess)
		if cl.ctx.Err() != nil {
			return
		}
	}
}

// serve builds the broker over sess (recovering it from the store), runs
// it until the Session ends, then cuts its clients and stops it.
func (cl *Cluster) serve(sess *raftstore.Session) {
	start := time.Now()
	local := map[string]*chanListener{}
	for name, f := range cl.front {
		local[name] = newChanListener(f.l.Addr())
	}
	o := cl.opts
	o.Store = sess
	o.metricsSink = cl.metrics.sink()
	o.Listen = func(front, _ string) (net.Listener, error) {
		if l := local[front]; l != nil {
			return l, nil
		}
		return nil, fmt.Errorf("no %s listener in this cluster node", front)
	}
	a, err := Start(o)
	if err != nil {
		cl.log.Error("cannot serve as leader", zap.Uint64("term", sess.Term()), zap.Error(err))
		cl.metrics.brokerStopped()
		sess.Close()
		select {
		case <-cl.ctx.Done():
		case <-time.After(time.Second):
		}
		return
	}
	st := &servingState{sess: sess, app: a, local: local}
	cl.mu.Lock()
	cl.serving = st
	cl.mu.Unlock()
	cl.log.Info("serving as the leader", zap.Uint64("term", sess.Term()), zap.Duration("rebuild", time.Since(start)))
	select {
	case <-sess.Done():
		cl.log.Warn("stopped serving: no longer the leader", zap.Error(sess.Err()))
	case <-cl.ctx.Done():
	}
	cl.mu.Lock()
	cl.serving = nil
	cl.mu.Unlock()
	cl.metrics.brokerStopped()
	for _, l := range local {
		l.cut() // the broker's clients, at once
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil && cl.ctx.Err() == nil {
		cl.log.Warn("stopping the deposed broker", zap.Error(err))
	}
}

// backup checkpoints the node's state database once it holds everything
// the serving leader had committed (raftstore.Node.Backup).
func (cl *Cluster) backup(ctx context.Context, dir string) (Manifest, error) {
	info, err := cl.node.Backup(ctx, dir)
	return Manifest{Kind: KindCluster, Node: info.Node, Leader: info.Leader, Term: info.Term, Index: info.Index}, err
}

// Node is the cluster's Raft node (status, leader).
func (cl *Cluster) Node() *raftstore.Node { return cl.node }

// Serving reports whether the local broker serves clients now.
func (cl *Cluster) Serving() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.serving != nil
}

func (cl *Cluster) addr(name string) net.Addr {
	if f := cl.front[name]; f != nil {
		return f.l.Addr()
	}
	return nil
}

// AMQPAddr is the AMQP listener's address (nil when disabled).
func (cl *Cluster) AMQPAddr() net.Addr { return cl.addr("amqp") }

// AMQPSAddr is the AMQP-over-TLS listener's address (nil when disabled).
func (cl *Cluster) AMQPSAddr() net.Addr { return cl.addr("amqps") }

// HTTPAddr is the plain HTTP listener's address (nil when disabled).
func (cl *Cluster) HTTPAddr() net.Addr { return cl.addr("http") }

// HTTPSAddr is the HTTPS listener's address (nil when disabled).
func (cl *Cluster) HTTPSAddr() net.Addr { return cl.addr("https") }

// ConnectionString is the connection string for this node (any node
// serves every client).
func (cl *Cluster) ConnectionString() string {
	a := &App{opts: cl.opts, amqpAddr: cl.AMQPAddr()}
	return a.ConnectionString()
}

// TLSConnectionString is the connection string for AMQPS ("" when off).
func (cl *Cluster) TLSConnectionString() string {
	a := &App{opts: cl.opts, amqpsAddr: cl.AMQPSAddr()}
	return a.TLSConnectionString()
}

// Shutdown stops accepting, stops the local broker if it serves, closes
// proxied connections and the Raft node.
func (cl *Cluster) Shutdown(ctx context.Context) error {
	cl.admin.shutdown(ctx)
	cl.closeFronts()
	cl.cancel()
	select {
	case <-cl.done:
	case <-ctx.Done():
	}
	cl.proxy.cutAll()
	cl.metrics.close(ctx)
	return cl.node.Close()
}

func (cl *Cluster) closeFronts() {
	for _, f := range cl.front {
		f.l.Close()
	}
}
