package main

import (
	"context"
	"testing"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// omnibus check exits 0 on a consistent data directory and 1 once a
// message's body is gone.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	a, err := app.Start(app.Options{DataDir: dir, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Broker.Send(ctx, "q", &core.Message{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := runCheck([]string{"--data", dir}); err != nil {
		t.Fatalf("check of a consistent directory: %v", err)
	}
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b storage.Batch
	b.DeletePrefix([]byte{'B'}) // every body record (core/keys.go)
	if err := st.Apply(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := runCheck([]string{"--data", dir}); cli.ExitCode(err) != 1 {
		t.Fatalf("check of a directory missing a body: %v (exit %d), want exit 1", err, cli.ExitCode(err))
	}
}
