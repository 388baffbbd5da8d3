package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/conformance"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// An in-process cluster for `conformance --cluster N --groups G`: N nodes
// on loopback, each with its data on disk in a temporary directory, made
// as an operator makes one: node 1's peer CA and certificate as
// `omnibus cluster init` makes them, every other node's certificate
// traded for a join token node 1 issues (`omnibus cluster token`), so the
// peer ports speak mutual TLS. The suite's clients use every node
// (conformance.Target.Nodes: a scenario sends through one node and
// receives through the next).

// clusterExcluded are the scenarios a cluster run leaves out, each for
// its reason (conformance/README.md lists them too).
var clusterExcluded = []struct{ prefix, why string }{
	{"txn-crash", "kills the endpoint: a node's crash is what make cluster-test covers"},
	{"tls-", "the nodes listen on plain AMQP and HTTP only; TLS is the same code as on one node"},
	{"websocket-", "the nodes listen on plain AMQP and HTTP only; WebSockets are the same code as on one node"},
	{"autodelete-deletes-idle", "takes minutes (--slow)"},
	// Gaps of a cluster with data groups, found by this run; delete the
	// entry once the cluster passes the scenario (--only runs it).
}

// clusterOnly is the --only of a cluster run that gives none: every
// scenario but the excluded ones (Go's regexp has no negative lookahead,
// so the names are listed).
func clusterOnly() *regexp.Regexp {
	var keep []string
	for _, s := range conformance.Scenarios() {
		if !clusterExcludes(s.Name) {
			keep = append(keep, regexp.QuoteMeta(s.Name))
		}
	}
	return regexp.MustCompile("^(" + strings.Join(keep, "|") + ")$")
}

func clusterExcludes(name string) bool {
	for _, e := range clusterExcluded {
		if strings.HasPrefix(name, e.prefix) {
			return true
		}
	}
	return false
}

// startCluster starts n nodes with groups data groups (each core with
// faults on, none normally) and returns the
// target (node 1's connection string and HTTP gateway, the others'
// connection strings in Nodes) and a stop function that shuts the nodes
// down and removes their directory. It returns once every data group
// and the meta group have a leader that serves.
func startCluster(n, groups int, faults core.Faults) (_ *conformance.Target, stop func(), err error) {
	dir, err := os.MkdirTemp("", "omnibus-conformance-cluster")
	if err != nil {
		return nil, nil, err
	}
	var nodes []*app.Cluster
	stop = func() {
		for _, c := range nodes {
			_ = c.Shutdown(context.Background())
		}
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	peers := map[uint64]string{}
	for id := uint64(1); id <= uint64(n); id++ {
		if peers[id], err = freeLoopback(); err != nil {
			return nil, nil, err
		}
	}
	var issuer *raftstore.Client
	for id := uint64(1); id <= uint64(n); id++ {
		o := app.Options{DataDir: filepath.Join(dir, fmt.Sprint(id)), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			AMQPSAddr: "-", HTTPSAddr: "-", MetricsAddr: "-", TxnTimeout: inProcessTxnTimeout, Faults: faults,
			Limits: core.Limits{MaxEntityBytes: inProcessMaxEntity}}
		co := app.ClusterOptions{NodeID: id, Peers: peers, Groups: groups}
		if id == 1 {
			creds, err := peertls.Init(app.PeerTLSDir(filepath.Join(o.DataDir, "cluster")), 1, time.Now())
			if err != nil {
				return nil, nil, err
			}
			issuer = raftstore.NewClient(creds, app.AdminToken(app.DefaultKeyName, app.DefaultKey))
			defer issuer.CloseIdleConnections()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			co.JoinToken, err = issuer.JoinToken(ctx, peers[1], id, 0)
			cancel()
			if err != nil {
				return nil, nil, fmt.Errorf("a join token for node %d: %w", id, err)
			}
		}
		c, err := app.StartCluster(o, co)
		if err != nil {
			return nil, nil, fmt.Errorf("node %d: %w", id, err)
		}
		nodes = append(nodes, c)
	}
	target := &conformance.Target{ConnectionString: nodes[0].ConnectionString(), HTTP: "http://" + nodes[0].HTTPAddr().String(),
		CrossProtocolLocks: true, TxnTimeout: inProcessTxnTimeout, MaxEntityBytes: inProcessMaxEntity}
	for _, c := range nodes[1:] {
		target.Nodes = append(target.Nodes, c.ConnectionString())
	}
	if err := waitClusterServes(nodes, groups); err != nil {
		return nil, nil, err
	}
	return target, stop, nil
}

// waitClusterServes waits (a minute at most) until each data group is led
// by its preferred node (group g by node g, while there are as many nodes:
// the balancer hands it there within seconds of the start, and a link to
// a group on the move is refused), then until a partitioned queue created
// through node 1 takes a message of every one of 64 keys through every
// node (so every group's leader serves), and deletes it again.
func waitClusterServes(nodes []*app.Cluster, groups int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	settled := func() bool {
		for _, c := range nodes {
			for g := 1; g <= groups; g++ {
				gn := c.Node().GroupNode(uint64(g))
				want := uint64((g-1)%len(nodes) + 1)
				if gn != nil && gn.Leader() != want {
					return false
				}
			}
			if c.Node().Leader() == 0 {
				return false
			}
		}
		return true
	}
	for !settled() {
		if ctx.Err() != nil {
			return errors.New("the cluster's groups did not settle on their preferred leaders within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, port, _ := net.SplitHostPort(nodes[0].HTTPAddr().String())
	adm, err := admin.NewClientFromConnectionString("Endpoint=sb://localhost:"+port+"/;SharedAccessKeyName="+app.DefaultKeyName+";SharedAccessKey="+app.DefaultKey,
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: plainHTTP{}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		return err
	}
	const probe = "cluster-ready-probe"
	if err := retryBusy(ctx, func() error {
		_, err := adm.CreateQueue(ctx, probe, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{EnablePartitioning: to.Ptr(true)}})
		return err
	}); err != nil {
		return fmt.Errorf("creating %s: %w", probe, err)
	}
	for _, c := range nodes {
		cl, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(), nil)
		if err != nil {
			return err
		}
		snd, err := cl.NewSender(probe, nil)
		if err == nil {
			for k := 0; k < 64 && err == nil; k++ {
				err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("probe"), PartitionKey: to.Ptr(fmt.Sprint("k", k))}, nil)
			}
		}
		_ = cl.Close(context.Background())
		if err != nil {
			return fmt.Errorf("probing the cluster's groups: %w", err)
		}
	}
	_, err = adm.DeleteQueue(ctx, probe, nil)
	return err
}

// retryBusy runs op until it does not fail with server busy (503: the
// meta group has no leader yet) or ctx ends.
func retryBusy(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil || !strings.Contains(err.Error(), "503") || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeLoopback is a loopback address nothing listened on a moment ago.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// plainHTTP sends the admin client's https:// requests as plain HTTP to
// the node's gateway.
type plainHTTP struct{}

func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(req)
}
