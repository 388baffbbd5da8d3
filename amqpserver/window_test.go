package amqpserver

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// sendN puts n messages of size bytes on path.
func (ts *testServer) sendN(t testing.TB, path string, n, size int) {
	t.Helper()
	for sent := 0; sent < n; sent += 500 {
		msgs := make([]*core.Message, min(500, n-sent))
		for i := range msgs {
			msgs[i] = &core.Message{Body: bytes.Repeat([]byte{byte(sent + i)}, size)}
		}
		ts.MustSend(t, path, msgs...)
	}
}

// deliveryCounts peeks every message of path and counts them by
// delivery count.
func (ts *testServer) deliveryCounts(t testing.TB, path string) map[int32]int {
	t.Helper()
	msgs, err := ts.Broker.Peek(t.Context(), path, core.PeekOptions{Max: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]int{}
	for _, m := range msgs {
		got[m.DeliveryCount]++
	}
	return got
}

// syncWindow is sync with the session window left as given: an echoed
// session flow, answered once every earlier frame was handled.
func (p *rawPeer) syncWindow(nextIncoming, window uint32) {
	p.t.Helper()
	p.writeFrame(0, &frames.Flow{NextIncomingID: &nextIncoming, IncomingWindow: window, OutgoingWindow: 100, Echo: true})
	for {
		switch f := p.readFrame().(type) {
		case *frames.Flow:
			return
		case *frames.Transfer:
			p.t.Fatalf("transfer %+v while the window was closed", f)
		}
	}
}

// TestClosedWindowTakesNothing is a client that begins with incoming-window
// 0 and grants a large credit: nothing may be taken from the queue (locked,
// or deleted in receive-and-delete) until the window opens, and then only
// what the window takes. Messages never sent are neither counted as
// delivered nor lost when the client goes away.
func TestClosedWindowTakesNothing(t *testing.T) {
	const n = 50
	for _, mode := range []frames.ReceiverSettleMode{frames.ReceiverSettleModeSecond, frames.ReceiverSettleModeFirst} {
		rad := mode == frames.ReceiverSettleModeFirst
		t.Run(fmt.Sprintf("receive-and-delete=%v", rad), func(t *testing.T) {
			ts := newTestServer(t, nil)
			ts.sendN(t, "q", n, 1024)
			p := ts.rawDial(t)
			p.open()
			p.attachRawReceiver("q", 0, mode)
			p.grant(0, 0, 0, 1<<20)
			p.syncWindow(0, 0)
			ts.onConn(t, func(c *conn) {
				if c.outBytes != 0 || c.sessions[0].outFrames != 0 {
					t.Errorf("with the window closed, %d bytes in %d frames are held for the client", c.outBytes, c.sessions[0].outFrames)
				}
			})
			if got := ts.deliveryCounts(t, "q"); got[0] != n {
				t.Fatalf("with the window closed: delivery counts %v, want all %d at 0", got, n)
			}

			// Open the window for 10 frames: exactly 10 messages go.
			p.syncWindow(0, 10)
			for i := range 10 {
				tr, ok := p.readFrame().(*frames.Transfer)
				if !ok || tr.Settled != rad {
					t.Fatalf("frame %d: %+v, want a transfer (settled %v)", i, tr, rad)
				}
			}
			p.syncWindow(10, 0)
			counts := ts.deliveryCounts(t, "q")
			if rad && (len(counts) != 1 || counts[0] != n-10) {
				t.Errorf("after 10 received-and-deleted: delivery counts %v, want %d at 0", counts, n-10)
			}
			if !rad && (counts[1] != 10 || counts[0] != n-10) {
				t.Errorf("after 10 peek-locked: delivery counts %v, want 10 at 1 and %d at 0", counts, n-10)
			}

			// The client goes away: what it was sent stays counted (or
			// deleted), the rest is untouched.
			p.nc.Close()
			ts.waitConns(t, 0)
			counts = ts.deliveryCounts(t, "q")
			if want := n - 10; counts[0] != want {
				t.Errorf("after the client left: delivery counts %v, want %d never delivered", counts, want)
			}
			if c := ts.MustCounts(t, "q"); c.DeadLetter != 0 {
				t.Errorf("%d messages dead-lettered", c.DeadLetter)
			}
		})
	}
}

// waitConns waits until the server has n connections.
func (ts *testServer) waitConns(t testing.TB, n int) {
	t.Helper()
	count := func() int {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return len(ts.srv.mu.conns)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowConsumerIsBounded is a client with a wide window and credit for
// the whole queue that reads nothing. The server stops taking messages
// at the unsettled cap or, with that cap out of the way, once its output
// and its delivery buffer are full. When the client reads and settles,
// every message arrives exactly once, on its first delivery.
func TestSlowConsumerIsBounded(t *testing.T) {
	const n = 20000
	const size = 1024
	t.Run("unsettled cap", func(t *testing.T) {
		ts := newTestServer(t, func(c *Config) { c.Limits.MaxUnsettledPerLink = 3000 })
		ts.sendN(t, "q", n, size)
		p := ts.rawDial(t)
		p.open()
		p.attachRawReceiver("q", 1<<20, frames.ReceiverSettleModeSecond)
		p.grant(0, 1<<20, 0, n)
		ts.waitFor(t, "3000 deliveries and no pull", func(c *conn) bool {
			s := c.sessions[0]
			return s.nextDeliveryID == 3000 && !s.links[0].out.pulling
		})
		if taken := ts.deliveryCounts(t, "q")[1]; taken != 3000 {
			t.Errorf("%d messages taken, want the 3000 of the unsettled cap", taken)
		}
		p.readAllAndComplete(ts, n)
	})
	t.Run("delivery buffer", func(t *testing.T) {
		ts := newTestServer(t, func(c *Config) {
			c.Limits.MaxDeliveryBuffer = minDeliveryBuffer
			c.Limits.MaxUnsettledPerLink = n
		})
		ts.sendN(t, "q", n, size)
		p := ts.rawDial(t)
		p.open()
		p.attachRawReceiver("q", 1<<20, frames.ReceiverSettleModeSecond)
		p.grant(0, 1<<20, 0, n)
		var held int
		ts.waitFor(t, "the server to wait for the socket", func(c *conn) bool {
			held = c.outBytes
			return len(c.stalled) > 0
		})
		if held > minDeliveryBuffer+2*size {
			t.Errorf("%d bytes held for the client, want at most the delivery buffer (%d) and a message", held, minDeliveryBuffer)
		}
		taken := ts.deliveryCounts(t, "q")[1]
		if taken == n {
			t.Fatalf("all %d messages were taken for a client that reads nothing", n)
		}
		t.Logf("taken while the client read nothing: %d of %d (%d bytes held)", taken, n, held)
		p.readAllAndComplete(ts, n)
	})
}

// waitFor polls the connection's state until cond holds.
func (ts *testServer) waitFor(t testing.TB, what string, cond func(c *conn) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for ok := false; !ok; {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
		ts.onConn(t, func(c *conn) { ok = cond(c) })
	}
}

// readAllAndComplete reads n transfers on handle 0, accepting each, and
// waits until the queue is empty: each message must arrive once, and on
// its first delivery.
func (p *rawPeer) readAllAndComplete(ts *testServer, n int) {
	t := p.t.(*testing.T)
	t.Helper()
	p.nc.SetDeadline(time.Now().Add(60 * time.Second))
	seen := map[string]bool{}
	for len(seen) < n {
		f, ok := p.readFrame().(*frames.Transfer)
		if !ok {
			continue
		}
		if seen[string(f.DeliveryTag)] {
			t.Fatalf("delivery tag %x received twice", f.DeliveryTag)
		}
		seen[string(f.DeliveryTag)] = true
		p.writeFrame(0, &frames.Disposition{Role: frames.RoleReceiver, First: *f.DeliveryID, Settled: true, State: &frames.Accepted{}})
	}
	deadline := time.Now().Add(20 * time.Second)
	for ts.MustCounts(t, "q").Active != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages left after all were completed", ts.MustCounts(t, "q").Active)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := ts.MustCounts(t, "q"); c.DeadLetter != 0 {
		t.Errorf("%d messages dead-lettered", c.DeadLetter)
	}
}

// TestGoAMQPReceivesEverythingOnce receives a backlog of messages that
// need several frames each (go-amqp's frames are 64 KiB) through a small
// delivery buffer, in both modes: every message arrives once, on its
// first delivery, and nothing is dead-lettered or left behind.
func TestGoAMQPReceivesEverythingOnce(t *testing.T) {
	const n = 200
	const size = 150 << 10
	for _, mode := range []amqp.ReceiverSettleMode{amqp.ReceiverSettleModeSecond, amqp.ReceiverSettleModeFirst} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			ts := newTestServer(t, func(c *Config) { c.Limits.MaxDeliveryBuffer = 512 << 10 })
			ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "big", MaxMessageSizeInKilobytes: 1024, MaxDeliveryCount: 1})
			ts.sendN(t, "big", n, size)
			s := ts.session(t)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			r, err := s.NewReceiver(ctx, "big", &amqp.ReceiverOptions{SettlementMode: &mode, Credit: 5000})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[byte]bool{}
			for range n {
				m, err := r.Receive(ctx, nil)
				if err != nil {
					t.Fatalf("after %d: %v", len(seen), err)
				}
				body := m.GetData()
				if len(body) != size || seen[body[0]] && len(seen) < 256 {
					t.Fatalf("message of %d bytes, first byte %d (seen %v)", len(body), body[0], seen[body[0]])
				}
				seen[body[0]] = true
				if m.Header != nil && m.Header.DeliveryCount != 0 {
					t.Errorf("message delivered before: header delivery-count %d", m.Header.DeliveryCount)
				}
				if mode == amqp.ReceiverSettleModeSecond {
					if err := r.AcceptMessage(ctx, m); err != nil {
						t.Fatalf("accept: %v", err)
					}
				}
			}
			if c := ts.MustCounts(t, "big"); c.Active != 0 || c.DeadLetter != 0 {
				t.Errorf("counts after receiving all: %+v", c)
			}
		})
	}
}

// TestMessageLargerThanWindow sends a message of four frames to a client
// whose window never takes more than one: it starts at once and goes on
// frame by frame as the client's flows open the window.
func TestMessageLargerThanWindow(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.sendN(t, "q", 2, 200<<10)
	p := ts.rawDial(t)
	p.open()
	p.attachRawReceiver("q", 1, frames.ReceiverSettleModeSecond)
	p.grant(0, 1, 0, 2)
	got, n := 0, uint32(0)
	for {
		tr, ok := p.readFrame().(*frames.Transfer)
		if !ok {
			continue
		}
		n++
		got += len(tr.Payload)
		if !tr.More {
			break
		}
		p.openWindow(n, 1)
	}
	if n < 4 || got < 200<<10 {
		t.Errorf("the message came in %d frames of %d bytes, want at least 4 frames of 200 KiB", n, got)
	}
	// The second message goes the same way once the window opens again.
	p.openWindow(n, 1)
	if tr, ok := p.readFrame().(*frames.Transfer); !ok || tr.DeliveryID == nil || *tr.DeliveryID != 1 {
		t.Fatalf("got %+v, want the first frame of delivery 1", tr)
	}
}

// openWindow opens the session window to window frames past
// nextIncoming, without waiting for an answer.
func (p *rawPeer) openWindow(nextIncoming, window uint32) {
	p.t.Helper()
	p.writeFrame(0, &frames.Flow{NextIncomingID: &nextIncoming, IncomingWindow: window, OutgoingWindow: 100})
}

// TestDrainWithClosedWindow drains a link whose session window is closed
// (the link already waits for room): nothing can go, so the drain ends at
// once with the credit used up.
func TestDrainWithClosedWindow(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.sendN(t, "q", 3, 10)
	p := ts.rawDial(t)
	p.open()
	p.attachRawReceiver("q", 0, frames.ReceiverSettleModeSecond)
	p.grant(0, 0, 0, 5)
	zero, five, h := uint32(0), uint32(5), uint32(0)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &zero, IncomingWindow: 0, OutgoingWindow: 100,
		Handle: &h, DeliveryCount: &zero, LinkCredit: &five, Drain: true})
	switch f := p.readFrame().(type) {
	case *frames.Flow:
		if !f.Drain || f.LinkCredit == nil || *f.LinkCredit != 0 || *f.DeliveryCount != 5 {
			t.Fatalf("drain reply %+v, want drain, credit 0, delivery-count 5", f)
		}
	default:
		t.Fatalf("got %+v, want the drain reply", f)
	}
	if got := ts.deliveryCounts(t, "q"); got[0] != 3 {
		t.Errorf("delivery counts %v after a drain with the window closed, want all 3 untouched", got)
	}
}

// TestSlowReaderStillSends fills the server's output to a client that
// stops reading, then has that client send: its sends are still taken
// and stored, since transfers leave the socket's buffer room for the
// other frames and the connection goroutine never waits for the writer.
func TestSlowReaderStillSends(t *testing.T) {
	const n = 20000
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxUnsettledPerLink = n })
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q2"})
	ts.sendN(t, "q", n, 1024)
	p := ts.rawDial(t)
	p.open()
	p.attachRawReceiver("q", 1<<20, frames.ReceiverSettleModeSecond)
	p.grant(0, 1<<20, 0, n)
	ts.waitFor(t, "the server to wait for the socket", func(c *conn) bool { return len(c.stalled) > 0 })

	a := senderAttach("q2")
	a.Handle = 1
	burst := []frames.Body{a}
	for i := range uint32(100) {
		burst = append(burst, transferFrame(1, i, true, false, dataSection(t, 100)))
	}
	p.writeFrames(0, burst...)
	deadline := time.Now().Add(20 * time.Second)
	for ts.MustCounts(t, "q2").Active != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 100 sends stored while the client did not read", ts.MustCounts(t, "q2").Active)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
