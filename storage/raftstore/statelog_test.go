package raftstore

import (
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// TestStateReplayedFromTheLog: the state database keeps no write-ahead
// log of its own; what it had not flushed when its node stopped comes
// back from the Raft log at the next start.
func TestStateReplayedFromTheLog(t *testing.T) {
	c := newTestCluster(t, 1, false, nil)
	s, id := c.session()
	for i := range 100 {
		mustPut(t, s, fmt.Sprintf("k%03d", i), fmt.Sprint(i))
	}
	applied := c.nodes[id].Status().Applied
	c.stop(id)

	st, err := openStateStore(c.dirs[id], pebblestore.Options{NoWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _, err := st.applied()
	st.close()
	if err != nil {
		t.Fatal(err)
	}
	if onDisk >= applied {
		t.Fatalf("the state database holds index %d of %d after a stop: this test wants it behind the log", onDisk, applied)
	}

	c.start(id)
	s, _ = c.session()
	for i := range 100 {
		if v, err := s.Get(fmt.Appendf(nil, "k%03d", i)); err != nil || string(v) != fmt.Sprint(i) {
			t.Fatalf("after a restart k%03d = %q, %v", i, v, err)
		}
	}
	t.Logf("the state database was at index %d of %d; the log brought back the rest", onDisk, applied)
}
