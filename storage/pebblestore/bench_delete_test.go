//go:build linux

package pebblestore

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkRawPebbleQueueDelete measures what Pebble spends, flushes and
// compactions included, on a queue's message records when they are
// deleted with Delete (what the store does) or with SingleDelete (which
// Pebble allows for a key set once and deleted once: the set and the
// deletion annihilate when they meet, instead of the tombstone travelling
// down the levels). Each op writes message i (a 1 KiB body and a small
// state record under keys laid out as the core lays them out) and deletes
// message i-backlog: a short backlog dies in the memtable, a long one
// after its records were flushed. Batches are not synced, so the CPU time
// is the LSM's, not the fsync's; it is reported per message as the
// process's user+system time (getrusage), background work included, with
// a final flush and the compactions it triggers counted, next to the
// bytes the run left in sstables and blob files (the live backlog's
// records and whatever tombstones remain).
func BenchmarkRawPebbleQueueDelete(b *testing.B) {
	body := make([]byte, benchValueSize)
	state := make([]byte, 24)
	for _, backlog := range []int{1000, 50000} {
		for _, single := range []bool{false, true} {
			name := fmt.Sprintf("backlog=%d/delete", backlog)
			if single {
				name = fmt.Sprintf("backlog=%d/singledelete", backlog)
			}
			b.Run(name, func(b *testing.B) {
				dir := b.TempDir()
				opts, err := Options{}.pebbleOptions(dir)
				if err != nil {
					b.Fatal(err)
				}
				db, err := pebble.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				key := func(tab byte, seq int) []byte {
					k := make([]byte, 17)
					k[0] = tab
					binary.BigEndian.PutUint64(k[1:], 1)
					binary.BigEndian.PutUint64(k[9:], uint64(seq))
					return k
				}
				write := func(i int) error {
					pb := db.NewBatch()
					defer pb.Close()
					if err := pb.Set(key('B', i), body, nil); err != nil {
						return err
					}
					if err := pb.Set(key('Q', i), state, nil); err != nil {
						return err
					}
					if old := i - backlog; old >= 0 {
						del := pb.Delete
						if single {
							del = pb.SingleDelete
						}
						if err := del(key('Q', old), nil); err != nil {
							return err
						}
						if err := del(key('B', old), nil); err != nil {
							return err
						}
					}
					return pb.Commit(pebble.NoSync)
				}
				for i := range backlog { // the backlog, untimed
					if err := write(i); err != nil {
						b.Fatal(err)
					}
				}
				cpu0 := processCPU(b)
				b.ResetTimer()
				for i := range b.N {
					if err := write(backlog + i); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Flush(); err != nil {
					b.Fatal(err)
				}
				waitCompactions(db)
				b.StopTimer()
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/msg")
				b.ReportMetric(float64(diskBytes(b, dir))/float64(b.N), "disk-B/msg")
			})
		}
	}
}

// diskBytes is the size of the sstables and blob files in dir: what the
// messages that were not deleted, and the tombstones of those that were,
// left behind. (Pebble's flush metrics count a flush's input, the
// memtable, not what it wrote.)
func diskBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); ext == ".sst" || ext == ".blob" {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitCompactions waits until db runs no compaction (at most 30 s).
func waitCompactions(db *pebble.DB) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if db.Metrics().Compact.NumInProgress == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
