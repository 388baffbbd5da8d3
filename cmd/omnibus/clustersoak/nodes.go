package clustersoak

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/loopback"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// queueName is the queue the soak loads. Its deliveries never run out
// (each failover raises the delivery count of every message locked at
// that moment) and its lock outlives a failover.
const queueName = "failover"

const keyName = "RootManageSharedAccessKey"

func soakConfig() string {
	return `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[{"Name":"` + queueName +
		`","Properties":{"MaxDeliveryCount":1000000,"LockDuration":"PT1M"}}]}],"Logging":{"Type":"Console"}}}`
}

// node is one omnibus process of the cluster, started on the same
// directory and addresses every time.
type node struct {
	id      int
	net     *network
	bin     string
	args    []string
	amqp    string // its AMQP listener
	peer    string // its peer transport
	http    string // its HTTP listener (management: the partitioned queue's creation)
	data    string // its data directory
	logPath string
	log     *os.File
	client  *raftstore.Client // asks for its status (startAll sets it)

	cmd    *exec.Cmd
	exited chan struct{}
	frozen bool // SIGSTOPped
	cutOff bool // its link is down
}

// newNodes prepares count nodes in dir.
func newNodes(c *Config, nw *network, dir, key string, count int) ([]*node, error) {
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(soakConfig()), 0o644); err != nil {
		return nil, err
	}
	nodes := make([]*node, count)
	peers := make([]string, count)
	for i := range nodes {
		n := &node{id: i + 1, net: nw, bin: c.Binary}
		amqpPort, peerPort, httpPort := "5672", "7000", "8080"
		if !nw.netns {
			var err error
			if httpPort, err = loopback.FreePort(); err != nil {
				return nil, err
			}
			if amqpPort, err = loopback.FreePort(); err != nil {
				return nil, err
			}
			if peerPort, err = loopback.FreePort(); err != nil {
				return nil, err
			}
		}
		n.amqp = net.JoinHostPort(nw.nodeIP(n.id), amqpPort)
		n.peer = net.JoinHostPort(nw.nodeIP(n.id), peerPort)
		n.http = net.JoinHostPort(nw.nodeIP(n.id), httpPort)
		peers[i] = fmt.Sprintf("%d=%s", n.id, n.peer)
		n.logPath = filepath.Join(dir, fmt.Sprintf("node%d.log", n.id))
		f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		n.log = f
		nodes[i] = n
	}
	for _, n := range nodes {
		n.data = filepath.Join(dir, fmt.Sprintf("node%d", n.id))
		n.args = []string{"serve", "--node-id", fmt.Sprint(n.id), "--peers", strings.Join(peers, ","),
			"--data", n.data, "--config", cfg,
			"--amqp-addr", n.amqp, "--amqps-addr", "-", "--http-addr", n.http, "--https-addr", "-",
			// Metrics on (the default for a node), on a port of their own
			// per node: the default one would be taken by the first.
			"--metrics-addr", net.JoinHostPort(nw.nodeIP(n.id), "0"),
			"--key-name", keyName, "--key", key}
		if c.Tick > 0 {
			n.args = append(n.args, "--raft-tick", c.Tick.String())
		}
		if c.ElectionTicks > 0 {
			n.args = append(n.args, "--raft-election-ticks", fmt.Sprint(c.ElectionTicks))
		}
		if c.Groups > 0 {
			n.args = append(n.args, "--groups", fmt.Sprint(c.Groups))
		}
	}
	return nodes, nil
}

// startAll starts the cluster the way an operator sets up a secure one
// (mutual TLS on the peer ports): `omnibus cluster init` makes the CA and
// node 1's certificate, node 1 starts, and `omnibus cluster token` on it
// makes a join token for each other node, which that node's first start
// trades for its certificate (a restart, with the same flags, does not
// use it again).
func startAll(nodes []*node, key string, timeout time.Duration) error {
	first := nodes[0]
	if out, err := exec.Command(first.bin, "cluster", "init", "--node-id", fmt.Sprint(first.id), "--data", first.data).CombinedOutput(); err != nil {
		return fmt.Errorf("omnibus cluster init: %v: %s", err, out)
	}
	creds, err := peertls.Load(filepath.Join(first.data, "cluster", "tls"))
	if err != nil {
		return err
	}
	client := raftstore.NewClient(creds, nil)
	for _, n := range nodes {
		n.client = client
	}
	if err := first.start(); err != nil {
		return err
	}
	for _, n := range nodes[1:] {
		out, err := exec.Command(first.bin, "cluster", "token", "--addr", first.peer, "--node-id", fmt.Sprint(n.id),
			"--data", first.data, "--key-name", keyName, "--key", key, "--timeout", timeout.String()).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			return fmt.Errorf("omnibus cluster token for node %d: %v: %s", n.id, err, stderr)
		}
		n.args = append(n.args, "--join-token", strings.TrimSpace(string(out)))
		if err := n.start(); err != nil {
			return err
		}
	}
	return nil
}

// start runs the node's process; it does not wait for it to be ready.
func (n *node) start() error {
	fmt.Fprintf(n.log, "\n==== cluster soak: starting node %d at %s\n", n.id, time.Now().Format(time.RFC3339Nano))
	cmd := n.net.command(n.id, n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting node %d: %w", n.id, err)
	}
	n.cmd, n.exited, n.frozen = cmd, make(chan struct{}), false
	go func() {
		_ = cmd.Wait()
		close(n.exited)
	}()
	return nil
}

// running reports whether the process is alive.
func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL and waits for it.
func (n *node) kill() error {
	if !n.running() {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-n.exited
	return nil
}

// freeze stops (SIGSTOP, returning once the process is stopped) or
// resumes (SIGCONT) the process.
func (n *node) freeze(on bool) error {
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	n.frozen = on
	if err := n.cmd.Process.Signal(sig); err != nil || !on {
		return err
	}
	return waitStopped(n.cmd.Process.Pid)
}

// status asks the node for its Raft status.
func (n *node) status(timeout time.Duration) (raftstore.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.client.Status(ctx, n.peer)
}

// nodeStatus is one reachable node's answer to a status request.
type nodeStatus struct {
	n  *node
	st raftstore.Status
}

// statuses asks every reachable node (running, neither frozen nor cut
// off) for its status at once, and returns the answers that came.
func statuses(nodes []*node) []nodeStatus {
	ch := make(chan *nodeStatus, len(nodes))
	for _, n := range nodes {
		go func() {
			if !n.running() || n.frozen || n.cutOff {
				ch <- nil
				return
			}
			st, err := n.status(300 * time.Millisecond)
			if err != nil {
				ch <- nil
				return
			}
			ch <- &nodeStatus{n, st}
		}()
	}
	var out []nodeStatus
	for range nodes {
		if a := <-ch; a != nil {
			out = append(out, *a)
		}
	}
	return out
}

// serving finds the node that serves clients now, if any: among those
// reachable, one whose status says it leads and serves.
func serving(nodes []*node) (*node, raftstore.Status, error) {
	var best *nodeStatus
	for _, a := range statuses(nodes) {
		if a.st.Serving && (best == nil || a.st.Term > best.st.Term) {
			best = &a
		}
	}
	if best == nil {
		return nil, raftstore.Status{}, errNoLeader
	}
	return best.n, best.st, nil
}
