package clusterrpc

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// benchMessage is what the load generator sends (cmd/omnibus/bench): a
// 1 KiB body and its three application properties.
func benchMessage() *core.Message {
	return &core.Message{
		Body: bytes.Repeat([]byte{'x'}, 1024),
		ApplicationProperties: map[string]any{
			"omnibus-bench-run": "r0123456789abcdef", "omnibus-bench-seq": int64(123456), "omnibus-bench-sent": time.Now().UnixNano(),
		},
	}
}

// reportCPU reports the process's CPU time per operation since start
// (processCPU): load on the machine lengthens ns/op, much less this.
func reportCPU(b *testing.B, start time.Duration) {
	if cpu := processCPU() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkCodecSendRequest encodes a send's arguments as Backend.SendAsync
// does.
func BenchmarkCodecSendRequest(b *testing.B) {
	msgs := []*core.Message{benchMessage()}
	b.ReportAllocs()
	for b.Loop() {
		e := &enc{}
		e.string("q")
		e.messages(msgs)
		if e.err != nil {
			b.Fatal(e.err)
		}
	}
}

// BenchmarkCodecDecodeMessages decodes a send's arguments as the server
// does.
func BenchmarkCodecDecodeMessages(b *testing.B) {
	e := &enc{}
	e.string("q")
	e.messages([]*core.Message{benchMessage()})
	b.ReportAllocs()
	for b.Loop() {
		d := &dec{b: e.b}
		_ = d.string()
		if d.messages(); d.err != nil {
			b.Fatal(d.err)
		}
	}
}

// benchLocked is a pull's answer: ten bench messages as a peek-lock
// receive hands them out (stamped, locked).
func benchLocked() []*core.Message {
	msgs := make([]*core.Message, 10)
	for i := range msgs {
		m := benchMessage()
		m.SequenceNumber = int64(1000 + i)
		m.EnqueuedTime = time.Unix(1, 0)
		m.LockedUntil = time.Unix(60, 0)
		m.DeliveryCount = 1
		m.LockToken[0] = byte(i)
		msgs[i] = m
	}
	return msgs
}

// BenchmarkCodecReceiveAnswer encodes a pull's answer as the server
// does (serverConn.call, opReceive) and queues it (answerCommitted).
func BenchmarkCodecReceiveAnswer(b *testing.B) {
	msgs := benchLocked()
	c := &serverConn{fc: newHeldFrameConn()}
	b.ReportAllocs()
	for b.Loop() {
		e := &enc{}
		e.messages(msgs)
		if e.err != nil {
			b.Fatal(e.err)
		}
		c.answerCommitted(1, e.b)
		c.fc.pending = c.fc.pending[:0]
	}
}

// BenchmarkCodecDecodeReceiveAnswer decodes a pull's answer as the
// client does (Backend.Receive).
func BenchmarkCodecDecodeReceiveAnswer(b *testing.B) {
	e := &enc{}
	e.messages(benchLocked())
	b.ReportAllocs()
	for b.Loop() {
		d := &dec{b: e.b}
		if d.messages(); d.err != nil {
			b.Fatal(d.err)
		}
	}
}

// BenchmarkCodecCompletions encodes a batch of 64 completions as
// Backend.CompleteMany does and queues it (Client.start).
func BenchmarkCodecCompletions(b *testing.B) {
	toks := make([]core.LockToken, 64)
	for i := range toks {
		toks[i][0] = byte(i)
	}
	cc := &clientConn{fc: newHeldFrameConn(), pending: map[uint64]*pendingCall{}}
	c := &Client{cur: cc}
	b.ReportAllocs()
	for b.Loop() {
		e := &enc{}
		e.string("q")
		e.uvarint(uint64(len(toks)))
		for _, t := range toks {
			e.token(t)
		}
		e.bool(true)
		_, id, _, _ := c.start(b.Context(), opCompleteMany, 1, e.b, true, nil, nil)
		delete(cc.pending, id)
		cc.fc.pending = cc.fc.pending[:0]
	}
}

// BenchmarkRoutedSendAsync is one routed send of a bench message, from
// the routed broker through a real loopback connection to the group's
// broker and back, one at a time: the allocations and bytes per message
// of both ends (and of the group's core, on a memstore).
func BenchmarkRoutedSendAsync(b *testing.B) {
	r := newRig(b)
	r.remote.MustCreate(b, core.Entity{Kind: core.KindQueue, Name: "q"})
	msgs := []*core.Message{benchMessage()}
	done := make(chan error, 1)
	b.ReportAllocs()
	defer reportCPU(b, processCPU())
	for b.Loop() {
		if err := r.routed.SendAsync("q", msgs, func(_ []int64, err error) { done <- err }); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoutedSendAsyncDeepCallback is BenchmarkRoutedSendAsync with
// a callback that needs a deep stack, as a front's does (the AMQP
// front's posts its disposition through several calls): the stack the
// answer's work runs on grows, or has grown already.
func BenchmarkRoutedSendAsyncDeepCallback(b *testing.B) {
	r := newRig(b)
	r.remote.MustCreate(b, core.Entity{Kind: core.KindQueue, Name: "q"})
	msgs := []*core.Message{benchMessage()}
	done := make(chan error, 1)
	b.ReportAllocs()
	defer reportCPU(b, processCPU())
	for b.Loop() {
		if err := r.routed.SendAsync("q", msgs, func(_ []int64, err error) { done <- deepStack(err) }); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// deepStack returns err from under a 16 KiB stack frame.
//
//go:noinline
func deepStack(err error) error {
	var frame [2048]int64
	frame[len(frame)-1] = 1
	if frame[0] != 0 {
		return nil
	}
	return err
}

// BenchmarkRoutedPull is one routed peek-lock receive of one bench
// message and its completion (a batch of one), as a pull makes them; the
// messages are in the group's queue before the clock starts.
func BenchmarkRoutedPull(b *testing.B) { benchmarkRoutedPull(b, 1) }

// BenchmarkRoutedPull10 is BenchmarkRoutedPull ten messages at a time (a
// receive of ten, a completion of the ten): per message.
func BenchmarkRoutedPull10(b *testing.B) { benchmarkRoutedPull(b, 10) }

func benchmarkRoutedPull(b *testing.B, batch int) {
	r := newRig(b)
	r.remote.MustCreate(b, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 5 * time.Minute, MaxSizeInMegabytes: 5120})
	sends := make([]*core.Message, 100)
	for i := range sends {
		sends[i] = benchMessage()
	}
	for n := 0; n < b.N*batch; n += len(sends) {
		r.remote.MustSend(b, "q", sends[:min(len(sends), b.N*batch-n)]...)
	}
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, processCPU())
	toks := make([]core.LockToken, batch)
	for range b.N {
		got, err := r.routed.Receive(ctx, "q", core.ReceiveOptions{Mode: core.PeekLock, Max: batch})
		if err != nil || len(got) != batch {
			b.Fatalf("receive: %d, %v", len(got), err)
		}
		for i, m := range got {
			toks[i] = m.LockToken
		}
		for _, err := range r.routed.CompleteMany("q", toks, true) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkFrameRead reads 1 KiB frames off a loopback TCP connection
// whose peer writes them 64 at a time, as answers gathered by the
// writer (frameConn.writeLoop) arrive: per frame.
func BenchmarkFrameRead(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		var burst []byte
		for range 64 {
			burst = binary.BigEndian.AppendUint32(burst, 1024)
			burst = append(burst, make([]byte, 1024)...)
		}
		for {
			if _, err := nc.Write(burst); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	fc := newFrameConn(nc, nil)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, processCPU())
	for range b.N {
		if buf, err = fc.read(buf); err != nil {
			b.Fatal(err)
		}
	}
}
