package pebblestore_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
	"go.uber.org/zap/zaptest"
)

// Options.FailLogSyncs fails the write-ahead log's fsyncs once set: the
// commit waiting on the first returns with its outcome unknown, and every
// later write is refused.
func TestFailLogSyncs(t *testing.T) {
	fail := new(atomic.Bool)
	s := mustOpen(t, t.TempDir(), pebblestore.Options{FailLogSyncs: fail, Logger: zaptest.NewLogger(t)})
	defer s.Close()
	if err := s.Apply(msgBatch(0)); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := s.Apply(msgBatch(1)); !errors.Is(err, storage.ErrOutcomeUnknown) {
		t.Fatalf("Apply once log fsyncs fail = %v, want ErrOutcomeUnknown", err)
	}
	if err := s.Apply(msgBatch(2)); !errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrOutcomeUnknown) {
		t.Fatalf("Apply after a failed log fsync = %v, want ErrUnavailable", err)
	}
}
