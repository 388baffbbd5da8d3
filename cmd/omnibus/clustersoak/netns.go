package clustersoak

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// network is where the nodes run: each in a network namespace of its own
// on a bridge (so one can be cut off), or all on loopback.
type network struct {
	netns  bool
	why    string // why not namespaces, when not
	prefix string // of every interface and namespace name this run made
	subnet string // a.b.c of the bridge's /24
	bridge string
	made   []string // namespaces made, for the teardown
}

// newNetwork makes the nodes' network. mode is Config.Netns.
func newNetwork(mode string, nodes int) (*network, error) {
	if mode == "off" {
		return &network{why: "--netns off"}, nil
	}
	why := netnsUnavailable()
	if why == "" {
		n, err := makeNamespaces(nodes)
		if err == nil {
			return n, nil
		}
		why = err.Error()
	}
	if mode == "on" {
		return nil, fmt.Errorf("network namespaces: %s", why)
	}
	return &network{why: why}, nil
}

// netnsUnavailable says why namespaces cannot be made here ("" if they
// can be tried).
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "not root (ip netns needs CAP_NET_ADMIN)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (iproute2 is not installed)"
	}
	return ""
}

// makeNamespaces builds a bridge and one namespace per node, each joined
// to the bridge by a veth pair. Names carry a random prefix, so that runs
// side by side do not meet.
func makeNamespaces(nodes int) (n *network, err error) {
	var b [3]byte
	_, _ = rand.Read(b[:])
	n = &network{netns: true, prefix: "om" + hex.EncodeToString(b[:2]),
		subnet: fmt.Sprintf("10.%d.%d", 200+int(b[0])%50, 1+int(b[2])%250)}
	n.bridge = n.prefix + "br"
	defer func() {
		if err != nil {
			n.teardown()
		}
	}()
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", n.subnet + ".1/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return n, err
		}
	}
	for i := 1; i <= nodes; i++ {
		ns, host, peer := n.ns(i), n.hostVeth(i), n.prefix+fmt.Sprintf("p%d", i)
		if err := ip("netns", "add", ns); err != nil {
			return n, err
		}
		n.made = append(n.made, ns)
		for _, s := range [][]string{
			{"link", "add", host, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", ns},
			{"-n", ns, "addr", "add", n.nodeIP(i) + "/24", "dev", peer},
			{"-n", ns, "link", "set", peer, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"link", "set", host, "master", n.bridge},
			{"link", "set", host, "up"},
		} {
			if err := ip(s...); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (n *network) ns(i int) string       { return fmt.Sprintf("%sn%d", n.prefix, i) }
func (n *network) hostVeth(i int) string { return fmt.Sprintf("%sh%d", n.prefix, i) }

// nodeIP is node i's address.
func (n *network) nodeIP(i int) string {
	if !n.netns {
		return "127.0.0.1"
	}
	return fmt.Sprintf("%s.%d", n.subnet, 10+i)
}

// command runs bin for node i, inside its namespace when there are any.
func (n *network) command(i int, bin string, args ...string) *exec.Cmd {
	if !n.netns {
		return exec.Command(bin, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", n.ns(i), bin}, args...)...)
}

// cut takes node i off the network (true) or puts it back (false).
func (n *network) cut(i int, off bool) error {
	state := "up"
	if off {
		state = "down"
	}
	return ip("link", "set", n.hostVeth(i), state)
}

// teardown removes what makeNamespaces made.
func (n *network) teardown() {
	if !n.netns {
		return
	}
	for _, ns := range n.made {
		_ = ip("netns", "del", ns) // takes its veth pair with it
	}
	_ = ip("link", "del", n.bridge)
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

var errNoLeader = errors.New("no leader")
