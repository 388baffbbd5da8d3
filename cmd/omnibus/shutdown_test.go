package main

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
)

// stuckServer is a server whose Shutdown never returns, as one whose
// disk holds it would if nothing gave up on the disk.
type stuckServer struct{ server }

func (stuckServer) Shutdown(ctx context.Context) error { select {} }

func (stuckServer) AMQPAddr() net.Addr { return nil }

// A shutdown that cannot finish ends anyway once shutdownLimit has passed,
// with an error (exit status 1) that says so: SIGTERM stops the process
// within 5 s whatever the disk does.
func TestShutdownDoesNotWaitForAStuckServer(t *testing.T) {
	if shutdownLimit >= 5*time.Second {
		t.Fatalf("shutdownLimit is %v: SIGTERM must stop the process within 5 s", shutdownLimit)
	}
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- shutdown(stuckServer{}, make(chan os.Signal), zaptest.NewLogger(t)) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the shutdown of a stuck server did not end within a minute")
	}
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "did not finish") || cli.ExitCode(err) != 1 {
		t.Fatalf("shutdown of a stuck server = %v (exit status %d), want a failure saying it did not finish", err, cli.ExitCode(err))
	}
	if took < shutdownLimit {
		t.Fatalf("shutdown of a stuck server gave up after %v, before its limit of %v", took, shutdownLimit)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
}

// A second signal during the shutdown ends it at once.
func TestSecondSignalEndsTheShutdown(t *testing.T) {
	sig := make(chan os.Signal, 1)
	sig <- syscall.SIGINT
	err := shutdown(stuckServer{}, sig, zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "second interrupt") || cli.ExitCode(err) != 1 {
		t.Fatalf("shutdown with a second signal = %v, want a failure naming it", err)
	}
}
