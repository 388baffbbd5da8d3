package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// runClusterCA is `omnibus cluster ca rotate|renew|finish`: the three
// steps of replacing a cluster's CA (peertls, rotate.go), each on a
// node's files; the node takes them at its next start.
func runClusterCA(args []string) error {
	usage := errors.New("usage: omnibus cluster ca rotate [--data DIR]                  (on one node: a new CA, cross-signed by the current one)\n" +
		"       omnibus cluster ca renew --addr host:port [--data DIR]   (on every other node: its certificate from that node's new CA)\n" +
		"       omnibus cluster ca finish [--data DIR]                  (on every node, once all run renewed: the old CA no longer trusted)\n" +
		"Restart each node after each step, one at a time.")
	if len(args) == 0 {
		return cli.Exit(2, usage)
	}
	step := args[0]
	fs := flag.NewFlagSet("omnibus cluster ca "+step, flag.ContinueOnError)
	a := addPeerAccessFlags(fs, step == "renew")
	addr := fs.String("addr", "", "renew: the peer address of the node that rotated")
	if err := cli.ParseWithEnv(fs, args[1:]); err != nil {
		return err
	}
	dir := app.PeerTLSDir(a.dir())
	creds, err := peertls.Load(dir)
	if err != nil {
		return err
	}
	var next *peertls.Creds
	switch step {
	case "rotate":
		next, err = creds.Rotate(time.Now())
	case "renew":
		if *addr == "" {
			return cli.Exit(2, usage)
		}
		c, cerr := a.client()
		if cerr != nil {
			return cerr
		}
		defer c.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		next, err = c.Renew(ctx, *addr, creds.ID)
	case "finish":
		next, err = creds.Finish()
	default:
		return cli.Exit(2, usage)
	}
	if err != nil {
		return fmt.Errorf("cluster ca %s: %w", step, err)
	}
	if err := next.Save(dir); err != nil {
		return err
	}
	fmt.Printf("node %d: %s done in %s (signing CA %s, %d trusted); restart the node to take it\n",
		next.ID, step, dir, peertls.Fingerprint(next.CA.Cert), len(next.Trusted))
	return nil
}
