package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// peerAccess is how a cluster command reaches members' peer ports: with
// the certificate of a node on this machine (its cluster directory) and,
// for a change, the broker's key (Manage rights).
type peerAccess struct {
	data, clusterDir string
	insecure         bool
	keyName, key     string
}

// addPeerAccessFlags adds the flags of peerAccess; admin adds the key's.
func addPeerAccessFlags(fs *flag.FlagSet, admin bool) *peerAccess {
	a := &peerAccess{}
	fs.StringVar(&a.data, "data", app.DefaultDataDir, "data directory of a node on this machine (its certificate is the client's)")
	fs.StringVar(&a.clusterDir, "cluster-dir", "", "that node's cluster directory (default: <data>/cluster)")
	fs.BoolVar(&a.insecure, "peer-insecure", false, "the cluster's peer ports run without TLS")
	if admin {
		fs.StringVar(&a.keyName, "key-name", app.DefaultKeyName, "shared access key name of the broker (Manage rights)")
		fs.StringVar(&a.key, "key", app.DefaultKey, "shared access key of the broker")
	}
	return a
}

func (a *peerAccess) dir() string {
	if a.clusterDir != "" {
		return a.clusterDir
	}
	return filepath.Join(a.data, "cluster")
}

// client returns a Client with the node's certificate (none with
// --peer-insecure) and, if the flags have it, the key.
func (a *peerAccess) client() (*raftstore.Client, error) {
	var admin func() string
	if a.key != "" {
		admin = app.AdminToken(a.keyName, a.key)
	}
	if a.insecure {
		return raftstore.NewClient(nil, admin), nil
	}
	creds, err := peertls.Load(app.PeerTLSDir(a.dir()))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no node certificate in %s: give --data or --cluster-dir of a node on this machine "+
			"(or --peer-insecure for a cluster without TLS)", app.PeerTLSDir(a.dir()))
	}
	if err != nil {
		return nil, err
	}
	return raftstore.NewClient(creds, admin), nil
}

// runClusterInit is `omnibus cluster init`: a new cluster's CA and its
// first node's certificate, in the node's cluster directory.
func runClusterInit(args []string) error {
	fs := flag.NewFlagSet("omnibus cluster init", flag.ContinueOnError)
	id := fs.Uint64("node-id", 1, "the first node's id (its --node-id)")
	a := addPeerAccessFlags(fs, false)
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if *id == 0 {
		return cli.Exit(2, errors.New("--node-id must be > 0"))
	}
	dir := app.PeerTLSDir(a.dir())
	creds, err := peertls.Init(dir, *id, time.Now())
	if err != nil {
		return err
	}
	fmt.Printf("a new cluster CA (fingerprint %s) and node %d's certificate are in %s\n", peertls.Fingerprint(creds.CA.Cert), *id, dir)
	fmt.Printf("start node %d with the same --data (or --cluster-dir); for each further node, run on this machine\n"+
		"  omnibus cluster token --node-id N --addr <node %d's peer address>\n"+
		"and start that node with --join-token <the token>\n", *id, *id)
	return nil
}

// runClusterToken is `omnibus cluster token`: a join token for a new
// node, made by the member at --addr.
func runClusterToken(args []string) error {
	fs := flag.NewFlagSet("omnibus cluster token", flag.ContinueOnError)
	addr := fs.String("addr", "", "the peer address of the member that makes the token (the new node contacts it)")
	id := fs.Uint64("node-id", 0, "the new node's id (its --node-id; ids are never reused)")
	ttl := fs.Duration("ttl", raftstore.DefaultJoinTokenTTL, "how long the token may be used (once)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the member")
	a := addPeerAccessFlags(fs, true)
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if *addr == "" || *id == 0 {
		return cli.Exit(2, errors.New("usage: omnibus cluster token --addr host:port --node-id N [--ttl 1h]"))
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	tok, err := c.JoinToken(ctx, *addr, *id, *ttl)
	for errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil { // the member is starting
		time.Sleep(100 * time.Millisecond)
		tok, err = c.JoinToken(ctx, *addr, *id, *ttl)
	}
	if err != nil {
		return fmt.Errorf("cluster token: %w", err)
	}
	fmt.Println(tok)
	return nil
}
