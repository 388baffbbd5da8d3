package raftstore

import (
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/storagetest"
)

// TestSuiteSingleNode runs the store suite on a group of one, a fresh
// node per check: Close closes the node.
func TestSuiteSingleNode(t *testing.T) {
	storagetest.RunSuite(t, func(t *testing.T) storage.Store {
		c := newTestCluster(t, 1, false, nil)
		s, id := c.session()
		return &nodeStore{Session: s, node: c.nodes[id], forget: func() { delete(c.nodes, id) }}
	})
}

// nodeStore is a Session whose Close closes its node too.
type nodeStore struct {
	*Session
	node   *Node
	forget func()
}

func (s *nodeStore) Close() error {
	err := s.Session.Close()
	if err == nil {
		err = s.node.Close()
		s.forget()
	}
	return err
}

// TestSuiteThreeNodes runs the store suite on the leader of a group of
// three over the HTTP/2 transport on loopback. One group serves every
// check: each check gets a new Session (the previous check closed its
// own) on a store emptied first.
func TestSuiteThreeNodes(t *testing.T) {
	c := newTestCluster(t, 3, false, patientTiming)
	storagetest.RunSuite(t, func(t *testing.T) storage.Store {
		s, _ := c.session()
		b := &storage.Batch{Sync: true}
		b.DeletePrefix(nil)
		if err := s.Apply(b); err != nil {
			t.Fatalf("emptying the store: %v", err)
		}
		return s
	})
	// The followers applied what the leader did.
	s, leader := c.session()
	mustPut(t, s, "last", "write")
	for id, n := range c.nodes {
		waitFor(t, "node to apply the last write", func() bool {
			v, err := stateGet(n, "last")
			return err == nil && v == "write"
		})
		_ = id
	}
	_ = leader
}
