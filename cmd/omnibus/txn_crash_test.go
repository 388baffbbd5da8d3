package main

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/loopback"
	"github.com/omnibusmq/omnibus/conformance"
)

// freeAddr returns a loopback address no one listens on now, which
// restarts bind again (below the ephemeral range: loopback.FreeAddr).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// The conformance suite's crash scenario against the binary on disk:
// SIGKILL between a transaction's operations and its commit, then right
// after a commit, the broker restarted on the same addresses and data
// each time.
func TestConformanceTxnCrash(t *testing.T) {
	bin := buildBinary(t)
	amqpAddr, httpAddr := freeAddr(t), freeAddr(t)
	args := []string{"--data", filepath.Join(t.TempDir(), "data"), "--amqp-addr", amqpAddr, "--http-addr", httpAddr,
		"--https-addr", "-", "--amqps-addr", "-"}
	p := startBinary(t, bin, nil, args...)
	crashes := 0
	target := &conformance.Target{ConnectionString: connStr(amqpAddr), HTTP: "http://" + httpAddr,
		Crash: func(context.Context) error {
			kill9(t, p)
			p = startBinary(t, bin, nil, args...)
			crashes++
			return nil
		}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := conformance.Run(ctx, target, conformance.Options{Only: regexp.MustCompile(`^txn-crash`), Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	passed, failed, skipped := rep.Counts()
	if passed != 1 || failed+skipped != 0 || crashes != 2 {
		t.Fatalf("%s (%d crashes):\n%+v", rep.Summary(), crashes, rep.Results)
	}
}
