package clusterrpc

import (
	"bytes"
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
	for b.Loop() {
		if err := r.routed.SendAsync("q", msgs, func(_ []int64, err error) { done <- err }); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoutedPull is one routed peek-lock receive of one bench
// message and its completion (a batch of one), as a pull makes them.
func BenchmarkRoutedPull(b *testing.B) {
	r := newRig(b)
	r.remote.MustCreate(b, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: 5 * time.Minute})
	m := benchMessage()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		r.remote.MustSend(b, "q", m)
		b.StartTimer()
		got, err := r.routed.Receive(ctx, "q", core.ReceiveOptions{Mode: core.PeekLock, Max: 1})
		if err != nil || len(got) != 1 {
			b.Fatalf("receive: %d, %v", len(got), err)
		}
		if errs := r.routed.CompleteMany("q", []core.LockToken{got[0].LockToken}, true); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
}
