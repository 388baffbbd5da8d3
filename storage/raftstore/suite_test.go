package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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
// check: each check gets a store (emptied first) over the serving
// leader's Session. On a machine loaded far beyond its cores the leader
// may lose its lease in the middle of a check; the store then goes on
// over the next leader's Session, as the broker does after a failover
// (see failoverStore), and the test logs it.
func TestSuiteThreeNodes(t *testing.T) {
	c := newTestCluster(t, 3, false, patientTiming)
	storagetest.RunSuite(t, func(t *testing.T) storage.Store {
		f := &failoverStore{t: t, c: c}
		s, err := f.next()
		if err != nil {
			t.Fatal(err)
		}
		f.s = s
		b := &storage.Batch{Sync: true}
		b.DeletePrefix(nil)
		if err := f.Apply(b); err != nil {
			t.Fatalf("emptying the store: %v", err)
		}
		return f
	})
	// The followers applied what the leader did.
	s, _ := c.session()
	mustPut(t, s, "last", "write")
	for id, n := range c.nodes {
		waitFor(t, fmt.Sprintf("node %d to apply the last write", id), func() bool {
			v, err := stateGet(n, "last")
			return err == nil && v == "write"
		})
	}
}

// failoverStore is a storage.Store over the serving leader's Session that
// moves to the next leader's Session when its own ends (ErrUnavailable),
// and does the operation again there: every batch of the store's API is
// idempotent (sets and deletes), and a scan resumes after the last key it
// handed out. Close ends it for good.
type failoverStore struct {
	t *testing.T
	c *testCluster

	mu     sync.Mutex // guards s and closed
	s      *Session
	closed bool
}

// next returns the Session of whichever node serves first, waiting up to
// a minute.
func (f *failoverStore) next() (*Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch := make(chan *Session, len(f.c.nodes))
	for _, n := range f.c.nodes {
		go func() {
			s, err := n.Session(ctx)
			if err != nil {
				s = nil
			}
			ch <- s
		}()
	}
	var first *Session
	for range f.c.nodes {
		s := <-ch
		switch {
		case s == nil:
		case first == nil:
			first = s
			cancel() // the others give up
		default:
			s.Close() // a later leader too: keep the first
		}
	}
	if first == nil {
		return nil, errors.New("no node served within a minute")
	}
	return first, nil
}

// retry runs op on the current Session until it does not fail with
// storage.ErrUnavailable (a Session that ended), moving to the next one.
func (f *failoverStore) retry(op func(s *Session) error) error {
	for {
		f.mu.Lock()
		s, closed := f.s, f.closed
		f.mu.Unlock()
		if closed {
			return storage.ErrClosed
		}
		err := op(s)
		if !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrClosed) {
			return err
		}
		f.mu.Lock()
		if f.s == s && !f.closed {
			f.t.Logf("the leader's Session ended (%v); going on over the next leader's", err)
			s.Close()
			ns, nerr := f.next()
			if nerr != nil {
				f.mu.Unlock()
				return fmt.Errorf("%w (then %v)", err, nerr)
			}
			f.s = ns
		}
		f.mu.Unlock()
	}
}

func (f *failoverStore) Apply(b *storage.Batch) error {
	return f.retry(func(s *Session) error { return s.Apply(b) })
}

func (f *failoverStore) Get(key []byte) ([]byte, error) {
	var v []byte
	err := f.retry(func(s *Session) error {
		var err error
		v, err = s.Get(key)
		return err
	})
	return v, err
}

func (f *failoverStore) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	var last []byte
	return f.retry(func(s *Session) error {
		from := start
		if last != nil {
			from = append(bytes.Clone(last), 0)
		}
		return s.Scan(prefix, from, func(k, v []byte) (bool, error) {
			last = append(last[:0], k...)
			return fn(k, v)
		})
	})
}

// Health implements storage.HealthReporter: the current Session's.
func (f *failoverStore) Health() error {
	f.mu.Lock()
	s := f.s
	f.mu.Unlock()
	return s.Health()
}

func (f *failoverStore) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return storage.ErrClosed
	}
	f.closed = true
	return f.s.Close()
}
