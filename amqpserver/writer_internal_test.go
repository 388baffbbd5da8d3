package amqpserver

import "testing"

// TestEnqueueHandsOverWithoutCopy checks that output handed to an idle
// writer becomes its buffer as it is (and the writer's spare comes back
// for the next output), that output handed to a busy writer is copied
// after what it has, and that a large buffer is kept while the output
// stays large and dropped after the first small output.
func TestEnqueueHandsOverWithoutCopy(t *testing.T) {
	c := &conn{ob: newOutbox(), wdone: make(chan struct{})}
	spare := make([]byte, 0, 64)
	c.ob.buf = spare

	p := append(make([]byte, 0, 128), "first"...)
	next := c.enqueue(p)
	if &c.ob.buf[0] != &p[0] || string(c.ob.buf) != "first" {
		t.Errorf("output to an idle writer was copied: buf %q", c.ob.buf)
	}
	if len(next) != 0 || cap(next) != cap(spare) {
		t.Errorf("enqueue gave back len %d cap %d, want the writer's spare (cap %d)", len(next), cap(next), cap(spare))
	}

	q := append(next, "second"...)
	next = c.enqueue(q)
	if string(c.ob.buf) != "firstsecond" {
		t.Errorf("output to a busy writer: buf %q, want firstsecond", c.ob.buf)
	}
	if len(next) != 0 || cap(next) != cap(q) {
		t.Errorf("a copied output's buffer: len %d cap %d, want its own emptied (cap %d)", len(next), cap(next), cap(q))
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
