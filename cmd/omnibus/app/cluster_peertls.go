package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// PeerTLSDir is where a node keeps its peer certificate, under its
// cluster directory (`omnibus cluster init` writes it there).
func PeerTLSDir(clusterDir string) string { return filepath.Join(clusterDir, "tls") }

// joinTimeout bounds the join exchange at start.
const joinTimeout = 30 * time.Second

// peerCreds are the node's peer credentials: those in its cluster
// directory, or, the first time, those a join token gets it. Nil with
// PeerInsecure.
func peerCreds(c ClusterOptions, log *zap.Logger) (*peertls.Creds, error) {
	dir := PeerTLSDir(c.Dir)
	if c.PeerInsecure {
		if c.JoinToken != "" {
			return nil, errors.New("--join-token gets a peer certificate: it cannot be used with --peer-insecure")
		}
		log.Warn("the peer port runs without TLS (--peer-insecure): anyone who reaches it can change the cluster and read its data")
		return nil, nil
	}
	if peertls.Exists(dir) {
		creds, err := peertls.Load(dir)
		if err != nil {
			return nil, err
		}
		if creds.ID != c.NodeID {
			return nil, fmt.Errorf("the peer certificate in %s is node %d's, and this is node %d", dir, creds.ID, c.NodeID)
		}
		if c.JoinToken != "" {
			log.Info("this node has its peer certificate already: --join-token not used", zap.String("dir", dir))
		}
		return creds, nil
	}
	if c.JoinToken == "" {
		return nil, fmt.Errorf("no peer certificate in %s: run `omnibus cluster init` for a new cluster's first node, "+
			"or start with --join-token (from `omnibus cluster token` on a member); --peer-insecure runs the peer port "+
			"without TLS (a trusted network only)", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	creds, err := raftstore.Enroll(ctx, c.JoinToken, c.NodeID)
	if err != nil {
		return nil, fmt.Errorf("joining with --join-token: %w", err)
	}
	if err := creds.Save(dir); err != nil {
		return nil, err
	}
	log.Info("joined: got the peer certificate with the join token", zap.String("dir", dir))
	return creds, nil
}

// manageCheck is the peer port's admin check: the Authorization header
// holds a SAS token of the broker's key, which has Manage rights.
func manageCheck(o Options) (func(*http.Request) error, error) {
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: o.KeyName, Key: o.Key, Rights: sas.Manage}},
		ClockSkew: o.TokenClockSkew})
	if err != nil {
		return nil, err
	}
	return func(r *http.Request) error {
		_, err := v.Validate(r.Header.Get("Authorization"), "", sas.Manage)
		return err
	}, nil
}

// AdminToken is what a client of the peer port puts in the Authorization
// header of a request that changes the cluster: a SAS token of the
// broker's key (which has Manage rights), good for five minutes.
func AdminToken(keyName, key string) func() string {
	return func() string {
		return sas.Sign("https://omnibus-cluster/", keyName, key, time.Now().Add(5*time.Minute))
	}
}
