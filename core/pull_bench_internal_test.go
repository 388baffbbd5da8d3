package core

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// BenchmarkDeliveryCounts is what recording the delivery counts of pulls
// of 100 costs per message, written to a Pebble store whose memtable
// holds the sends of the messages (a drained backlog): a state record
// rewritten per message (before pull.go), or one delivery record per
// pull whose deletion rides along the next pull's write. Under callgrind
// (--toggle-collect=*deliveryCountsLoop, GOGC=off) it counts the path's
// instructions.
func BenchmarkDeliveryCounts(b *testing.B) {
	for _, tc := range []struct {
		name string
		pull bool
	}{{"state-per-message", false}, {"pull-record", true}} {
		b.Run(tc.name, func(b *testing.B) {
			const backlog, pullSize = 20_000, 100
			// A memtable that never fills and no lazy sync: nothing runs in
			// the background, so that the count repeats.
			st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), MemTableSize: 256 << 20, LazySyncDelay: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			br := &Broker{store: st}
			q := &queue{b: br, id: 7}
			body := make([]byte, 1024)
			states := make([]stateRec, backlog)
			for i := 0; i < backlog; i += pullSize {
				var batch storage.Batch
				for j := i; j < i+pullSize; j++ {
					states[j] = stateRec{state: StateActive, owner: q.id, size: 1024}
					batch.Set(seqKey(tabBody, q.id, int64(j+1)), body)
					batch.Set(seqKey(tabState, q.id, int64(j+1)), states[j].encode(nil))
				}
				if err := st.Apply(&batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			deliveryCountsLoop(b, q, states, b.N, tc.pull)
		})
	}
}

// deliveryCountsLoop records the counts of n deliveries in pulls of 100.
//
//go:noinline
func deliveryCountsLoop(b *testing.B, q *queue, states []stateRec, n int, pull bool) {
	const pullSize = 100
	got := make([]taken, pullSize)
	for i := 0; i < n; i += pullSize {
		for j := range got {
			seq := (i+j)%len(states) + 1
			states[seq-1].deliveryCount++
			got[j] = taken{seq: int64(seq), st: states[seq-1]}
		}
		w := q.b.newWrite(false)
		var p *pullRec
		if pull {
			p = w.setPull(q, got)
		} else {
			for j := range got {
				w.setState(q, got[j].seq, &got[j].st)
			}
		}
		if err := w.commit(); err != nil {
			b.Fatal(err)
		}
		if p != nil {
			p.live = 1
			q.dropPullLocked(p) // its messages completed: deleted by the next write
		}
	}
}
