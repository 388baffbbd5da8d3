package amqpserver

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestEnqueueHandsOverWithoutCopy checks that output is handed to the
// writer in the buffer it was written in (the writer's written buffers
// coming back for the next output), that a small output joins the
// buffer before it, that the writer writes it all in order and gives
// its buffers back, and that a large buffer is kept only while the
// output it carries stays large.
func TestEnqueueHandsOverWithoutCopy(t *testing.T) {
	c := &conn{ob: newOutbox(), wdone: make(chan struct{})}
	spare := make([]byte, 0, 64)
	c.ob.free = [][]byte{spare}

	p := append(make([]byte, 0, 128), "first"...)
	next := c.enqueue(p)
	if len(c.ob.bufs) != 1 || &c.ob.bufs[0][0] != &p[0] {
		t.Fatalf("output was copied: bufs %q", c.ob.bufs)
	}
	if len(next) != 0 || cap(next) != cap(spare) || len(c.ob.free) != 0 {
		t.Errorf("enqueue gave back len %d cap %d, want the free buffer (cap %d)", len(next), cap(next), cap(spare))
	}
	q := append(next, "second"...)
	if next = c.enqueue(q); len(c.ob.bufs) != 1 || string(c.ob.bufs[0]) != "firstsecond" {
		t.Errorf("a small output did not join the buffer before it: bufs %q", c.ob.bufs)
	}
	if len(next) != 0 || cap(next) != cap(q) {
		t.Errorf("a joined output's buffer: len %d cap %d, want its own emptied (cap %d)", len(next), cap(next), cap(q))
	}
	large := bytes.Repeat([]byte{'x'}, coalesceBelow+1)
	if c.enqueue(large); len(c.ob.bufs) != 2 || &c.ob.bufs[1][0] != &large[0] {
		t.Errorf("a large output was copied or joined: %d buffers", len(c.ob.bufs))
	}
	if got := c.ob.size.Load(); got != int64(len("firstsecond")+len(large)) {
		t.Errorf("size %d, want %d", got, len("firstsecond")+len(large))
	}

	client, server := net.Pipe()
	c.nc = server
	c.srv = &Server{}
	c.srv.cfg.IdleTimeout = time.Minute
	read := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); read <- b }()
	go c.writeLoop()
	signal(c.ob.wake)
	c.closeOutput()
	<-c.wdone
	server.Close()
	if got, want := <-read, append([]byte("firstsecond"), large...); !bytes.Equal(got, want) {
		t.Errorf("the writer wrote %d bytes %.20q…, want %d %.20q…", len(got), got, len(want), want)
	}
	if len(c.ob.free) != 2 || c.ob.size.Load() != 0 {
		t.Errorf("after the write: %d free buffers, size %d; want both buffers back, 0", len(c.ob.free), c.ob.size.Load())
	}

	big := make([]byte, keepWriteBuffer+1, 2*keepWriteBuffer)
	if b := reuseWriteBuffer(big, len(big)); b == nil || cap(b) != cap(big) {
		t.Error("a large buffer was dropped while the output it carries is large")
	}
	if b := reuseWriteBuffer(big, 100); b != nil {
		t.Error("a large buffer was kept after a small output")
	}
	if b := reuseWriteBuffer(spare, 10); b == nil {
		t.Error("a small buffer was dropped")
	}
}
