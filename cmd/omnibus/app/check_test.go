package app

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// Check on a data directory written by a real broker finds it consistent;
// after a body record is deleted behind the broker's back it names the
// message, and --check-consistency logs the same at start.
func TestCheckDataDirectory(t *testing.T) {
	dir := t.TempDir()
	a, err := Start(Options{DataDir: dir, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Broker.Send(ctx, "q", &core.Message{Body: []byte("one")}, &core.Message{Body: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if found, err := Check(Options{DataDir: dir}); err != nil || len(found) != 0 {
		t.Fatalf("check of a healthy directory: %v %v", found, err)
	}

	// Delete the first body record ('B' owner seq, keys.go).
	deleteFirstRecord(t, dir, []byte{'B'})
	found, err := Check(Options{DataDir: dir})
	if err != nil || len(found) != 1 || !strings.Contains(found[0], "body of message 1 is missing") {
		t.Fatalf("check after deleting a body: %q %v", found, err)
	}

	obs, logs := observer.New(zap.WarnLevel)
	a, err = Start(Options{DataDir: dir, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-", CheckConsistency: true, Logger: zap.New(obs)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(ctx)
	if got := logs.FilterField(zap.String("finding", found[0])).Len(); got != 1 {
		t.Fatalf("--check-consistency logged %d warnings for the finding; logs: %v", got, logs.All())
	}
}

func batchDeleting(key []byte) *storage.Batch {
	var b storage.Batch
	b.Delete(key)
	return &b
}

// Check looks into every namespace: a body deleted from a namespace's key
// range is found and the finding names the namespace.
func TestCheckEveryNamespace(t *testing.T) {
	dir := t.TempDir()
	a, err := Start(Options{DataDir: dir, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sales, err := a.Namespaces.Create(ctx, "sales", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sales.Broker().CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sales.Broker().Send(ctx, "q", &core.Message{Body: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if found, err := Check(Options{DataDir: dir}); err != nil || len(found) != 0 {
		t.Fatalf("check of a healthy directory: %v %v", found, err)
	}
	// sales is namespace 1: its body records start 'p' 1:8 'B'.
	deleteFirstRecord(t, dir, []byte{'p', 0, 0, 0, 0, 0, 0, 0, 1, 'B'})
	found, err := Check(Options{DataDir: dir})
	if err != nil || len(found) != 1 || !strings.HasPrefix(found[0], "namespace sales: ") || !strings.Contains(found[0], "body of message 1 is missing") {
		t.Fatalf("check after deleting a body of sales: %q %v", found, err)
	}
}

// deleteFirstRecord deletes, in the closed store at dir, the first
// record whose key starts with prefix; the test fails if there is none.
func deleteFirstRecord(t *testing.T, dir string, prefix []byte) {
	t.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var key []byte
	if err := st.Scan(prefix, nil, func(k, _ []byte) (bool, error) {
		key = append([]byte(nil), k...)
		return false, nil
	}); err != nil || key == nil {
		t.Fatalf("no record under %q: %v", prefix, err)
	}
	if err := st.Apply(batchDeleting(key)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
