package amqpserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// refusedWith dials with SASL PLAIN and returns the error the server
// closed the connection with.
func refusedWith(t *testing.T, ts *testServer) *amqp.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := amqp.Dial(ctx, "amqp://"+ts.addr, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey)})
	if err == nil {
		defer c.Close()
		_, err = c.NewSession(ctx, nil)
	}
	var ce *amqp.ConnError
	if !errors.As(err, &ce) || ce.RemoteErr == nil {
		t.Fatalf("connecting: %v, want the server to close the connection with an error", err)
	}
	return ce.RemoteErr
}

// A peer the admission policy refuses is told why (open, then close with
// amqp:unauthorized-access and the policy's text), whatever SASL it
// uses, and nothing else happens on its connection.
func TestAdmitRefusesWithReason(t *testing.T) {
	var asked atomic.Int32
	ts := newTestServer(t, func(c *Config) {
		c.Admit = func(remote net.Addr) error {
			if remote == nil {
				t.Error("Admit called without the peer's address")
			}
			asked.Add(1)
			return errors.New("protected mode: only loopback peers may connect")
		}
	})
	e := refusedWith(t, ts)
	if e.Condition != amqp.ErrCondUnauthorizedAccess || !strings.Contains(e.Description, "protected mode") {
		t.Errorf("refusal = %v, want unauthorized-access with the policy's reason", e)
	}

	// A raw peer with SASL ANONYMOUS sees the same, and its begin is not
	// answered: the close is the last frame.
	p := ts.rawDial(t)
	p.anonymousOpen()
	if e := p.expectClose(); e == nil || e.Condition != frames.CondUnauthorizedAccess {
		t.Fatalf("close = %v, want unauthorized-access", e)
	}
	p.writeFrame(0, &frames.Close{})
	p.expectEOF()
	if n := asked.Load(); n != 2 {
		t.Errorf("Admit asked %d times, want once per connection (2)", n)
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != 0 {
		t.Errorf("active = %d", c.Active)
	}
}

// MaxConnections is enforced at accept: once it is reached, a new peer
// is refused with amqp:resource-limit-exceeded before it can do
// anything, and is served again when a connection ends.
func TestMaxConnectionsAtAccept(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MaxConnections = 2 })
	first := ts.dial(t)
	mustSession(t, first)
	second := ts.dial(t)
	mustSession(t, second)
	if e := refusedWith(t, ts); e.Condition != amqp.ErrCondResourceLimitExceeded || !strings.Contains(e.Description, "2") {
		t.Errorf("third connection: %v, want resource-limit-exceeded naming the limit", e)
	}
	second.Close()
	waitFor(t, "the second connection to end", 5*time.Second, func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.mu.open == 1
	})
	mustSend(t, mustSender(t, ts.session(t), "q"), "after one closed")
}

// MaxPendingConnections bounds sockets in the handshake: silent sockets
// fill it, a new peer is refused with a reason, and once they go a
// client is served.
func TestMaxPendingConnections(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MaxPendingConnections = 2 })
	s1, s2 := ts.rawDial(t), ts.rawDial(t)
	waitFor(t, "two sockets in the handshake", 5*time.Second, func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.mu.pending == 2
	})
	if e := refusedWith(t, ts); e.Condition != amqp.ErrCondResourceLimitExceeded {
		t.Errorf("third socket: %v, want resource-limit-exceeded", e)
	}
	s1.nc.Close()
	s2.nc.Close()
	waitFor(t, "the silent sockets to go", 5*time.Second, func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return ts.srv.mu.pending == 0
	})
	mustSend(t, mustSender(t, ts.session(t), "q"), "served again")
}
