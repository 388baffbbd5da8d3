package raftstore

import (
	"errors"
	"testing"
	"time"
)

// TestLeaseLapseEndsTheSessionWhileTheLoopIsStuck: with the Raft loop
// held (it renews the lease and follows role changes), only watchLease
// can end the Session; it must, once the lease has run out. The watcher
// sleeps until the lease's end, so this fails if a Session's start does
// not wake it.
func TestLeaseLapseEndsTheSessionWhileTheLoopIsStuck(t *testing.T) {
	c := newTestCluster(t, 3, true, nil)
	s, id := c.session()
	n := c.nodes[id]
	holdLoop(t, n)
	waitSessionEnd(t, s, errLeaseLapsed, "its lease, while the loop was stuck")
	if left := n.leaseUntil.Load() - n.mono(); left > 0 {
		t.Fatalf("the Session ended %v before its lease did", time.Duration(left))
	}
}

// TestDiskStallEndsTheSession: a write that starts failing (retry) ends
// the leader's Session at once, long before its lease would lapse. The
// Raft loop is held, so that its own notice of the stall (the node no
// longer serves) cannot be what ends it.
func TestDiskStallEndsTheSession(t *testing.T) {
	c := newTestCluster(t, 3, true, nil)
	s, id := c.session()
	n := c.nodes[id]
	holdLoop(t, n)
	injected := errors.New("injected write fault")
	go n.retry("a test's write", func() error {
		select {
		case <-s.Done():
			return nil
		default:
			return injected
		}
	})
	waitSessionEnd(t, s, errStalled, "a stalled disk")
}

// waitSessionEnd fails unless s ends within a minute, with want.
func waitSessionEnd(t *testing.T, s *Session, want error, after string) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the Session outlived %s by a minute", after)
	}
	if err := s.Err(); !errors.Is(err, want) {
		t.Fatalf("the Session ended with %v, want %v", err, want)
	}
}

// holdLoop keeps n's Raft loop busy until the test ends.
func holdLoop(t *testing.T, n *Node) {
	release := make(chan struct{})
	held := make(chan struct{})
	n.runOnLoop(func() { close(held); <-release })
	t.Cleanup(func() { close(release) })
	<-held
}
