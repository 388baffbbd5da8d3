package amqpserver

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// exhaustedListener fails every Accept with EMFILE, as a process out of
// descriptors sees it, while exhausted is set; otherwise it accepts.
type exhaustedListener struct {
	net.Listener
	exhausted atomic.Bool
	failures  atomic.Int64
}

func (l *exhaustedListener) Accept() (net.Conn, error) {
	if l.exhausted.Load() {
		l.failures.Add(1)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An accept that fails with EMFILE no longer ends the listener: Serve
// backs off and retries, Health names the listener and the error while
// it lasts, and the connection that was waiting is served once
// descriptors are available again.
func TestAcceptRetriesAfterEMFILE(t *testing.T) {
	ts := newTestServer(t, nil)
	srv, err := New(Config{Broker: ts.Broker, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), Auth: ts.srv.cfg.Auth})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &exhaustedListener{Listener: inner}
	l.exhausted.Store(true)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	}()

	waitFor(t, "Health to report the failing accepts", 5*time.Second, func() bool { return srv.Health() != nil })
	herr := srv.Health()
	if !errors.Is(herr, syscall.EMFILE) || !strings.Contains(herr.Error(), inner.Addr().String()) {
		t.Fatalf("Health() = %v, want an EMFILE error naming %s", herr, inner.Addr())
	}
	// Several retries, spaced by the back-off rather than a busy loop.
	waitFor(t, "a few retries", 5*time.Second, func() bool { return l.failures.Load() >= 3 })

	// A client connects meanwhile (the kernel queues it); it is served
	// once accepts work again.
	dialed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := amqp.Dial(ctx, "amqp://"+inner.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey)})
		if err != nil {
			dialed <- err
			return
		}
		defer c.Close()
		s, err := c.NewSession(ctx, nil)
		if err != nil {
			dialed <- err
			return
		}
		snd, err := s.NewSender(ctx, "q", nil)
		if err != nil {
			dialed <- err
			return
		}
		dialed <- snd.Send(ctx, amqp.NewMessage([]byte("after EMFILE")), nil)
	}()
	if srv.Health() == nil {
		t.Fatal("Health() = nil while accepts fail")
	}
	l.exhausted.Store(false)
	if err := <-dialed; err != nil {
		t.Fatalf("client after the descriptors came back: %v", err)
	}
	if err := srv.Health(); err != nil {
		t.Errorf("Health() after a successful accept = %v, want nil", err)
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != 1 {
		t.Errorf("active = %d, want the 1 message sent after recovery", c.Active)
	}
}

// A listener closed behind the server's back ends its Serve, and Health
// says so; Shutdown then reports ErrServerClosed.
func TestHealthReportsLostListener(t *testing.T) {
	ts := newTestServer(t, nil)
	srv, err := New(Config{Broker: ts.Broker})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Health(); err != nil {
		t.Fatalf("Health() before serving = %v, want nil", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	waitFor(t, "Serve to start", 5*time.Second, func() bool { return srv.Addr() != nil })
	l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Serve returned %v, want net.ErrClosed", err)
	}
	if err := srv.Health(); err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("Health() = %v, want an error naming %s", err, l.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Health(); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Health() after Shutdown = %v, want ErrServerClosed", err)
	}
}

// The same with a real EMFILE: the server runs in a process limited to
// 64 descriptors, silent sockets use them up and accept fails with "too
// many open files"; Health says so, the process keeps running, and once
// the sockets go the listener serves a client again.
func TestAcceptSurvivesRealEMFILE(t *testing.T) {
	p := startServerProcess(t, serverNOFILEEnv+"=64")
	var socks []net.Conn
	defer func() {
		for _, nc := range socks {
			nc.Close()
		}
	}()
	for range 100 { // more than the server has descriptors; the kernel queues the rest
		nc, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		socks = append(socks, nc)
	}
	var health string
	waitFor(t, "Health to report EMFILE", 10*time.Second, func() bool {
		health = p.health()
		return strings.Contains(health, "too many open files")
	})
	t.Logf("health while out of descriptors: %s", health)
	if !strings.Contains(health, p.addr) {
		t.Errorf("health %q does not name the listener %s", health, p.addr)
	}
	for _, nc := range socks {
		nc.Close()
	}
	socks = nil

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := amqp.Dial(ctx, "amqp://"+p.addr, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey)})
	if err != nil {
		t.Fatalf("dial after the descriptors came back: %v", err)
	}
	defer c.Close()
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := s.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctx, amqp.NewMessage([]byte("served again")), nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	if h := p.health(); h != "ok" {
		t.Errorf("health after serving again = %q, want ok", h)
	}
}
