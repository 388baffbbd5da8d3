package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// runMemberChange is `omnibus cluster add` and `omnibus cluster remove`:
// a membership change asked, over the peer transport, of the leader that
// the member at --addr names. add waits until the new node has caught up
// and votes.
func runMemberChange(op string, args []string) error {
	fs := flag.NewFlagSet("omnibus cluster "+op, flag.ContinueOnError)
	addr := fs.String("addr", "", "the peer address of any current member (it names the leader)")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the change to be applied (a new node to catch up)")
	access := addPeerAccessFlags(fs, true)
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	usage := "omnibus cluster add --addr host:port ID=HOST:PORT, or omnibus cluster remove --addr host:port ID"
	if *addr == "" || fs.NArg() != 1 {
		return cli.Exit(2, errors.New("usage: "+usage))
	}
	c := raftstore.MemberChange{Op: op}
	if op == "add" {
		p, err := raftstore.ParsePeers(fs.Arg(0))
		if err != nil || len(p) != 1 {
			return cli.Exit(2, fmt.Errorf("%q: want the new node as ID=HOST:PORT (its --node-id and peer address)", fs.Arg(0)))
		}
		for id, a := range p {
			c.ID, c.Addr = id, a
		}
	} else {
		id, err := strconv.ParseUint(fs.Arg(0), 10, 64)
		if err != nil || id == 0 {
			return cli.Exit(2, fmt.Errorf("%q: want the id of the member to remove", fs.Arg(0)))
		}
		c.ID = id
	}
	client, err := access.client()
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := client.ChangeMembers(ctx, *addr, c); err != nil {
		return fmt.Errorf("cluster %s %d: %w", op, c.ID, err)
	}
	if op == "add" {
		fmt.Fprintf(os.Stdout, "node %d (%s) is a voting member (every member keeps its address; add it to the --peers you give new nodes)\n", c.ID, c.Addr)
	} else {
		fmt.Fprintf(os.Stdout, "node %d is no longer a member; stop it (the others forget its address)\n", c.ID)
	}
	return nil
}
