package core_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// noReads is a store whose reads fail while forbid is set.
type noReads struct {
	storage.Store
	forbid atomic.Bool
}

var errForbidden = errors.New("test: storage reads are forbidden now")

func (s *noReads) Get(key []byte) ([]byte, error) {
	if s.forbid.Load() {
		return nil, errForbidden
	}
	return s.Store.Get(key)
}

func (s *noReads) Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error {
	if s.forbid.Load() {
		return errForbidden
	}
	return s.Store.Scan(prefix, start, fn)
}

// A receiver working through a backlog that is only on disk (here: after
// a restart, which starts with an empty hand-over cache) finds the next
// batch already read into memory. A read-ahead that fails leaves the
// receive to read for itself.
func TestReadAhead(t *testing.T) {
	st := &noReads{}
	env := coretest.NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if prev == nil {
			st.Store = coretest.MemOpener(t, nil)
		}
		return st
	})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	msgs := make([]*core.Message, 300)
	for i := range msgs {
		msgs[i] = coretest.Text("m")
	}
	env.MustSend(t, "q", msgs...)
	env.Restart(t)

	receive := func(first int64) {
		t.Helper()
		got, err := env.Broker.Receive(t.Context(), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 100 || got[0].SequenceNumber != first || string(got[99].Body) != "m" {
			t.Fatalf("got %d messages from seq %d, want 100 from %d", len(got), got[0].SequenceNumber, first)
		}
		core.WaitForReadAhead(env.Broker, "q")
	}
	receive(1) // read from the store; 101..200 read ahead
	st.forbid.Store(true)
	receive(101) // from memory; the read-ahead of 201..300 fails
	st.forbid.Store(false)
	receive(201) // read by the receive itself
}
