package raftstore

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkTransport measures the peer transport alone: two transports on
// loopback, one sending to the other, as many messages in flight as a
// window allows. It reports the CPU time of the whole process (sender and
// receiver) per message, which is what a replicated send pays for the
// transport on a machine whose cores are all busy.
func BenchmarkTransport(b *testing.B) {
	for _, c := range []struct {
		name  string
		typ   pb.MessageType
		bytes int // of entry data per message
		ents  int
	}{
		{"app-100KiB", pb.MsgApp, 100 << 10, 25},
		{"app-24KiB", pb.MsgApp, 24 << 10, 16},
		{"ctl-heartbeat", pb.MsgHeartbeat, 0, 0},
		{"ctl-appresp", pb.MsgAppResp, 0, 0},
	} {
		for _, secure := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/tls=%v", c.name, secure), func(b *testing.B) {
				m := pb.Message{Type: c.typ, From: 1, To: 2, Term: 7, Index: 1000, LogTerm: 7, Commit: 990}
				for i := range c.ents {
					m.Entries = append(m.Entries, pb.Entry{Term: 7, Index: uint64(1001 + i), Data: make([]byte, c.bytes/c.ents)})
				}
				benchTransport(b, m, 4, secure)
			})
		}
	}
}

// benchTransport sends b.N copies of m from one transport to another,
// keeping at most window of them in flight. A small window keeps frames
// as they are in a loaded cluster (1.4 appends per frame on the leader's
// appends lane, 2.5 acknowledgements per frame from a follower, measured
// under omnibus-tools bench); a large one would batch more than a cluster does.
func benchTransport(b *testing.B, m pb.Message, window int, secure bool) {
	h1, h2 := newCountingHandler(0), newCountingHandler(window)
	sec1, sec2 := peerSecurity{}, peerSecurity{}
	if secure {
		sec1, sec2 = tlsSecurity(b, 1), tlsSecurity(b, 2)
	}
	t1, t2 := startTransportWith(b, 1, h1, sec1, nil), startTransportWith(b, 2, h2, sec2, nil)
	t1.setPeer(0, 2, t2.addr())
	t2.setPeer(0, 1, t1.addr())
	// Warm up: the streams are open and have carried a window's worth.
	for range window {
		h2.await(b)
		t1.send(0, 2, []pb.Message{m})
	}
	h2.drain(b, window)
	b.ReportAllocs()
	b.SetBytes(int64(m.Size()))
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		h2.await(b)
		t1.send(0, 2, []pb.Message{m})
	}
	h2.drain(b, window)
	b.StopTimer()
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/msg")
	if n := h1.unreachables.Load() + h2.unreachables.Load(); n > 0 {
		b.Fatalf("%d messages reported unreachable", n)
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
