package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// clusterFlags are serve's flags that make the broker a node of a
// replicated cluster (app.StartCluster). Without --node-id and --peers it
// is a single broker, exactly as before.
type clusterFlags struct {
	nodeID        uint64
	peers         string
	dir           string
	join          bool
	peerListen    string
	proxyWait     time.Duration
	maxProxied    int
	tick          time.Duration
	electionTicks int
	joinToken     string
	peerInsecure  bool
	groups        int
	replaceAfter  time.Duration
	applyDelay    time.Duration
}

func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	cf := &clusterFlags{}
	fs.Uint64Var(&cf.nodeID, "node-id", 0, "this node's id in a replicated cluster (with --peers; ids are never reused)")
	fs.StringVar(&cf.peers, "peers", "", "the cluster's members and their peer addresses, id=host:port,... (the same on every node)")
	fs.StringVar(&cf.dir, "cluster-dir", "", "the node's Raft log and replicated state (default: <data>/cluster)")
	fs.BoolVar(&cf.join, "join", false, "join an existing cluster instead of forming a new one with --peers")
	fs.StringVar(&cf.peerListen, "peer-listen", "", "where the peer transport listens (default: this node's address in --peers)")
	fs.DurationVar(&cf.proxyWait, "proxy-wait", raftstore.DefaultProxyWait, "how long a follower holds a client while no leader is known")
	fs.IntVar(&cf.maxProxied, "max-proxied", app.DefaultMaxProxied, "client connections a follower proxies to the leader at once")
	fs.DurationVar(&cf.tick, "raft-tick", raftstore.DefaultTickInterval, "Raft's tick; elections take --raft-election-ticks of them")
	fs.IntVar(&cf.electionTicks, "raft-election-ticks", raftstore.DefaultElectionTicks, "Raft's election timeout in ticks (randomized up to twice it; the leader lease is 3 ticks less)")
	fs.StringVar(&cf.joinToken, "join-token", "", "a join token (omnibus cluster token) that gets this node its peer certificate at its first start")
	fs.BoolVar(&cf.peerInsecure, "peer-insecure", false, "run the peer port on plain TCP, without certificates: anyone who reaches it controls the cluster")
	fs.IntVar(&cf.groups, "groups", 0, fmt.Sprintf("data groups a new cluster spreads its queues and topics over, each on three nodes and "+
		"led by one, so that every node does a share of the work (0: one group holds everything; at most %d; "+
		"fixed when the cluster is made, the same on every founding member and on a node that joins)", raftstore.MaxGroups))
	fs.DurationVar(&cf.replaceAfter, "replace-after", raftstore.DefaultReplaceAfter, "how long a member may be out of the meta "+
		"leader's reach before its data group replicas are moved to other nodes (negative: never; a removed member's are moved at once)")
	fs.DurationVar(&cf.applyDelay, "follower-apply-delay", raftstore.DefaultFollowerApplyDelay, "how long a follower may hold "+
		"committed writes before applying them to its copy: a message sent and settled within three quarters of it never reaches its disk "+
		"(negative: apply at once)")
	return cf
}

func (cf *clusterFlags) enabled() bool { return cf.nodeID != 0 || cf.peers != "" }

func (cf *clusterFlags) options() (app.ClusterOptions, error) {
	if cf.nodeID == 0 || cf.peers == "" {
		return app.ClusterOptions{}, errors.New("a cluster node needs both --node-id and --peers")
	}
	peers, err := raftstore.ParsePeers(cf.peers)
	if err != nil {
		return app.ClusterOptions{}, fmt.Errorf("--peers: %w", err)
	}
	return app.ClusterOptions{NodeID: cf.nodeID, Peers: peers, Dir: cf.dir, Join: cf.join, PeerListen: cf.peerListen,
		ProxyWait: cf.proxyWait, MaxProxied: cf.maxProxied, TickInterval: cf.tick, ElectionTicks: cf.electionTicks,
		JoinToken: cf.joinToken, PeerInsecure: cf.peerInsecure, Groups: cf.groups, ReplaceAfter: cf.replaceAfter,
		FollowerApplyDelay: cf.applyDelay}, nil
}

// server is what serve runs: a single broker or a cluster node.
type server interface {
	AMQPAddr() net.Addr
	AMQPSAddr() net.Addr
	HTTPAddr() net.Addr
	HTTPSAddr() net.Addr
	ConnectionString() string
	TLSConnectionString() string
	Shutdown(ctx context.Context) error
}

// caPath is the generated CA clients must trust, if the server made one.
// A cluster node has none of its own: each leader's broker uses its data
// directory's (give every node the same --tls-cert and --tls-key).
func caPath(s server) string {
	if a, ok := s.(*app.App); ok {
		return a.CAPath
	}
	return ""
}

// starter returns how serve starts: app.Start, or app.StartCluster when
// the cluster flags are set.
func (cf *clusterFlags) starter(o app.Options) (func() (server, error), error) {
	if !cf.enabled() {
		return func() (server, error) {
			a, err := app.Start(o)
			if err != nil {
				return nil, err
			}
			return a, nil
		}, nil
	}
	co, err := cf.options()
	if err != nil {
		return nil, cli.Exit(2, err)
	}
	return func() (server, error) {
		c, err := app.StartCluster(o, co)
		if err != nil {
			return nil, err
		}
		return c, nil
	}, nil
}

func init() {
	subcommands["cluster"] = clusterCommand
}

// clusterCommand is `omnibus cluster status`: every member's view of the
// group, asked over the peer transport.
func clusterCommand(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "add", "remove":
			return runMemberChange(args[0], args[1:])
		case "init":
			return runClusterInit(args[1:])
		case "token":
			return runClusterToken(args[1:])
		case "ca":
			return runClusterCA(args[1:])
		}
	}
	if len(args) == 0 || args[0] != "status" {
		return cli.Exit(2, errors.New("usage: omnibus cluster init --node-id 1 [--data DIR]   (a new cluster: its CA, node 1's certificate)\n"+
			"       omnibus cluster token --addr host:port --node-id N   (a join token: start node N with --join-token)\n"+
			"       omnibus cluster status --peers id=host:port,... | --addr host:port [--json]\n"+
			"       omnibus cluster add --addr host:port ID=HOST:PORT   (a node started with --join)\n"+
			"       omnibus cluster remove --addr host:port ID\n"+
			"       omnibus cluster ca rotate|renew|finish   (replace the cluster's CA; see -h)\n"+
			"The commands that ask members present the certificate of a node on this machine (--data or --cluster-dir)\n"+
			"and, for a change, the broker's --key."))
	}
	fs := flag.NewFlagSet("omnibus cluster status", flag.ContinueOnError)
	peers := fs.String("peers", "", "the members' peer addresses, id=host:port,...")
	addr := fs.String("addr", "", "one member's peer address; the others are learned from it")
	asJSON := fs.Bool("json", false, "print JSON, one status per member")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for each member")
	access := addPeerAccessFlags(fs, false)
	if err := cli.ParseWithEnv(fs, args[1:]); err != nil {
		return err
	}
	client, err := access.client()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	addrs := map[uint64]string{}
	switch {
	case *peers != "":
		p, err := raftstore.ParsePeers(*peers)
		if err != nil {
			return cli.Exit(2, fmt.Errorf("--peers: %w", err))
		}
		addrs = p
	case *addr != "":
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		st, err := client.Status(ctx, *addr)
		cancel()
		if err != nil {
			return err
		}
		addrs[st.ID] = *addr
		for _, m := range st.Members {
			if m.ID != st.ID && m.Addr != "" {
				addrs[m.ID] = m.Addr
			}
		}
	default:
		return cli.Exit(2, errors.New("cluster status needs --peers or --addr"))
	}
	statuses := collectStatuses(client, addrs, *timeout)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(statuses)
	}
	printStatuses(os.Stdout, statuses)
	for _, s := range statuses {
		if s.Leader != 0 && s.Error == "" {
			return nil
		}
	}
	return cli.Exit(1, errors.New("no member knows a leader"))
}

// memberStatus is one member's answer, or why it gave none.
type memberStatus struct {
	Addr string `json:"addr"`
	raftstore.Status
}

func collectStatuses(client *raftstore.Client, addrs map[uint64]string, timeout time.Duration) []memberStatus {
	ids := make([]uint64, 0, len(addrs))
	for id := range addrs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]memberStatus, len(ids))
	done := make(chan struct{}, len(ids))
	for i, id := range ids {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			st, err := client.Status(ctx, addrs[id])
			if err != nil {
				st = raftstore.Status{ID: id, State: "unreachable", Error: err.Error()}
			}
			out[i] = memberStatus{Addr: addrs[id], Status: st}
			done <- struct{}{}
		}()
	}
	for range ids {
		<-done
	}
	return out
}

func printStatuses(w io.Writer, statuses []memberStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPEER ADDRESS\tSTATE\tTERM\tLEADER\tCOMMIT\tAPPLIED\tSNAPSHOT\tSERVING\tCLIENTS")
	for _, s := range statuses {
		state := strings.TrimPrefix(s.State, "State")
		if s.Error != "" && s.State != "unreachable" {
			state += " (failed)"
		}
		var clients []string
		for _, k := range []string{"amqp", "amqps", "http", "https"} {
			if a := s.Client[k]; a != "" {
				clients = append(clients, k+"="+a)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%t\t%s\n", s.ID, s.Addr, state, s.Term, s.Leader,
			s.Commit, s.Applied, s.Snapshot, s.Serving, strings.Join(clients, " "))
	}
	tw.Flush()
	for _, s := range statuses {
		if s.Error != "" {
			fmt.Fprintf(w, "member %d: %s\n", s.ID, s.Error)
		}
	}
}
