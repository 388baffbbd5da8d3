package core_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// BenchmarkQueueDiskWrites counts the bytes the store writes per message
// of a queue, by kind of file: the write-ahead log, sstables (flushes and
// compactions) and blob files (bodies separated at flush, and their
// rewrites), on an in-memory file system (so the figures depend on
// neither the disk nor the machine's load). 1 KiB messages go through
// the core: sent 100 at a time, received peek-lock 100 at a time (which
// writes each delivery count) and completed. "keepup" settles each
// hundred as soon as it is sent, so most messages die in the memtable
// that holds them; "backlog" sends every message first (b.N × 1 KiB:
// many memtables) and then drains them. The store is flushed at the end
// and its compactions waited for, so what is counted is all the work the
// messages caused.
//
//	go test ./core -run '^$' -bench QueueDiskWrites -benchtime 200000x
func BenchmarkQueueDiskWrites(b *testing.B) {
	for _, backlog := range []bool{false, true} {
		name := "keepup"
		if backlog {
			name = "backlog"
		}
		b.Run(name, func(b *testing.B) {
			fs := &countingFS{FS: vfs.NewMem()}
			st, err := pebblestore.Open("db", pebblestore.Options{FS: fs})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			br, err := core.New(core.Config{Store: st, Clock: clock.NewFake(coretest.Epoch)})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			ctx := b.Context()
			if _, err := br.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q", MaxSizeInMegabytes: 81920}); err != nil {
				b.Fatal(err)
			}
			const batch = 100
			n := max(batch, b.N/batch*batch)
			msgs := make([]*core.Message, batch)
			send := func() {
				for i := range msgs {
					msgs[i] = &core.Message{Body: payload}
				}
				if _, err := br.Send(ctx, "q", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			drain := func() {
				got, err := br.Receive(ctx, "q", core.ReceiveOptions{Mode: core.PeekLock, Max: batch})
				if err != nil || len(got) == 0 {
					b.Fatalf("receive: %d, %v", len(got), err)
				}
				toks := make([]core.LockToken, len(got))
				for i, m := range got {
					toks[i] = m.LockToken
				}
				for _, err := range br.CompleteMany("q", toks, true) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			fs.reset()
			b.ResetTimer()
			if backlog {
				for range n / batch {
					send()
				}
				for range n / batch {
					drain()
				}
			} else {
				for range n / batch {
					send()
					drain()
				}
			}
			done, err := st.StartFlush()
			if err != nil {
				b.Fatal(err)
			}
			<-done
			fs.settle()
			b.StopTimer()
			per := func(v *atomic.Int64) float64 { return float64(v.Load()) / float64(n) }
			b.ReportMetric(per(&fs.wal), "wal-B/msg")
			b.ReportMetric(per(&fs.sst), "sst-B/msg")
			b.ReportMetric(per(&fs.blob), "blob-B/msg")
		})
	}
}

// countingFS counts the bytes written to each kind of Pebble file.
type countingFS struct {
	vfs.FS
	wal, sst, blob atomic.Int64
}

func (fs *countingFS) reset() {
	fs.settle()
	fs.wal.Store(0)
	fs.sst.Store(0)
	fs.blob.Store(0)
}

// settle waits until no byte has been written for half a second: the
// flushes and compactions set off are over.
func (fs *countingFS) settle() {
	last := int64(-1)
	for {
		now := fs.wal.Load() + fs.sst.Load() + fs.blob.Load()
		if now == last {
			return
		}
		last = now
		time.Sleep(500 * time.Millisecond)
	}
}

func (fs *countingFS) counter(name string) *atomic.Int64 {
	switch {
	case strings.HasSuffix(name, ".log"):
		return &fs.wal
	case strings.HasSuffix(name, ".sst"):
		return &fs.sst
	case strings.HasSuffix(name, ".blob"):
		return &fs.blob
	}
	return nil
}

func (fs *countingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, cat)
	if err != nil || fs.counter(name) == nil {
		return f, err
	}
	return &countingFile{File: f, n: fs.counter(name)}, nil
}

func (fs *countingFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil || fs.counter(newname) == nil {
		return f, err
	}
	return &countingFile{File: f, n: fs.counter(newname)}, nil
}

type countingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.n.Add(int64(n))
	return n, err
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.n.Add(int64(n))
	return n, err
}
