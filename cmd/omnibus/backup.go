package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
)

func init() {
	subcommands["backup"] = runBackup
	subcommands["restore"] = runRestore
}

// runBackup is `omnibus backup --to DIR`: a consistent copy of a running
// single node or cluster node, taken over its admin socket (the data
// directory's omnibus.sock, which only omnibus's user and root can open)
// without stopping traffic.
func runBackup(args []string) error {
	fs := flag.NewFlagSet("omnibus backup", flag.ContinueOnError)
	to := fs.String("to", "", "directory to write the backup into (new or empty)")
	data := fs.String("data", app.DefaultDataDir, "data directory of the running omnibus (single node or cluster node) to back up")
	socket := fs.String("socket", "", "its admin socket (default: <data>/"+app.AdminSocketName+")")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return cli.Exit(2, errors.New("usage: omnibus backup --to DIR [--data DIR | --socket PATH]"))
	}
	if *socket == "" {
		*socket = app.AdminSocketPath(*data)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m, err := app.TakeBackup(ctx, *socket, *to)
	if err != nil {
		return err
	}
	var size int64
	for _, n := range m.Files {
		size += n
	}
	what := "a single node"
	if m.Kind == app.KindCluster {
		what = fmt.Sprintf("cluster node %d (leader %d, term %d, log index %d)", m.Node, m.Leader, m.Term, m.Index)
	}
	fmt.Printf("backup of %s into %s: %d files, %.1f MiB; it holds every write acknowledged before %s\n",
		what, *to, len(m.Files), float64(size)/(1<<20), m.Began.UTC().Format(time.RFC3339Nano))
	return nil
}

// runRestore is `omnibus restore --from DIR --data NEW`: a data directory
// for a single node, or with --node-id for a new cluster's first node,
// from a backup of either.
func runRestore(args []string) error {
	fs := flag.NewFlagSet("omnibus restore", flag.ContinueOnError)
	var o app.RestoreOptions
	fs.StringVar(&o.From, "from", "", "the backup's directory (omnibus backup --to)")
	fs.StringVar(&o.DataDir, "data", "", "the new data directory (must hold no store)")
	fs.Uint64Var(&o.NodeID, "node-id", 0, "make it the first node of a new cluster, with this id (0: a single node)")
	fs.StringVar(&o.ClusterDir, "cluster-dir", "", "the new cluster node's directory (default: <data>/cluster)")
	fs.BoolVar(&o.PeerInsecure, "peer-insecure", false, "the new cluster runs its peer ports without TLS (no CA is made)")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if o.From == "" || o.DataDir == "" {
		return cli.Exit(2, errors.New("usage: omnibus restore --from BACKUP --data NEWDIR [--node-id N]"))
	}
	res, err := app.Restore(o)
	if err != nil {
		return err
	}
	fmt.Printf("restored %d keys from the %s backup of %s\n", res.Keys, res.Manifest.Kind, res.Manifest.Began.UTC().Format(time.RFC3339))
	if o.NodeID == 0 {
		fmt.Printf("start it: omnibus --data %s\n", o.DataDir)
		return nil
	}
	insecure := ""
	if o.PeerInsecure {
		insecure = " --peer-insecure"
	}
	fmt.Fprintf(os.Stdout, "start the new cluster's first node alone:\n  omnibus --node-id %d --peers %d=HOST:PORT --data %s%s\n"+
		"then add each other node: a join token (omnibus cluster token --data %s), the node started with --join and\n"+
		"--join-token, and omnibus cluster add; each receives the data as a snapshot.\n", o.NodeID, o.NodeID, o.DataDir, insecure, o.DataDir)
	return nil
}
