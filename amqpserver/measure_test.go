package amqpserver

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// openIdle opens n connections that log in with SASL PLAIN, exchange open
// frames and then say nothing, as idle clients do. They are closed at the
// end of the test.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var hello buffer.Buffer
	sasl, amqp := frames.SASLHeader.Bytes(), frames.AMQPHeader.Bytes()
	hello.Append(sasl[:])
	if err := frames.Write(&hello, frames.Frame{Type: frames.TypeSASL, Body: &frames.SASLInit{Mechanism: "PLAIN",
		InitialResponse: []byte("\x00" + testKeyName + "\x00" + testKey)}}); err != nil {
		t.Fatal(err)
	}
	hello.Append(amqp[:])
	if err := frames.Write(&hello, frames.Frame{Body: &frames.Open{ContainerID: "idle", MaxFrameSize: 65536}}); err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					continue
				}
				conns[i] = nc
				nc.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := nc.Write(hello.Bytes()); err != nil {
					errs <- err
					continue
				}
				err = readHello(frames.NewReader(nc, 1<<16))
				if err != nil {
					errs <- err
				}
				nc.SetDeadline(time.Time{})
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Cleanup(func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatalf("opening an idle connection: %v", err)
	}
	return conns
}

// readHello reads the server's side of a PLAIN login and open exchange.
func readHello(rd *frames.Reader) error {
	if _, err := rd.ReadProtocolHeader(); err != nil {
		return err
	}
	for {
		fr, err := rd.ReadFrame()
		if err != nil {
			return err
		}
		if o, ok := fr.Body.(*frames.SASLOutcome); ok {
			if o.Code != frames.SASLOK {
				return fmt.Errorf("SASL outcome %d", o.Code)
			}
			break
		}
	}
	if _, err := rd.ReadProtocolHeader(); err != nil {
		return err
	}
	fr, err := rd.ReadFrame()
	if err != nil {
		return err
	}
	if _, ok := fr.Body.(*frames.Open); !ok {
		return fmt.Errorf("%T instead of open", fr.Body)
	}
	return nil
}

// dialSilent opens n TCP connections that never send a byte.
func dialSilent(t *testing.T, addr string, n int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("silent socket: %v", err)
		}
		conns = append(conns, nc)
	}
}

// With thousands of idle connections and thousands of silent sockets
// held, a normal client (the official Go SDK) still connects and sends.
// The server's memory per held connection is logged (cmd/omnibus/README.md, Limits):
// measured, not asserted.
func TestHeldConnectionsLeaveRoomForClients(t *testing.T) {
	idle, silent := 3000, 3000
	if raceEnabled {
		idle, silent = 1000, 1000
	}
	p := startServerProcess(t)
	base := p.stats()
	openIdle(t, p.addr, idle)
	afterIdle := p.stats()
	dialSilent(t, p.addr, silent)
	// The server accepts them on its own time: wait until each has its
	// goroutine.
	var afterSilent procStats
	waitFor(t, "the silent sockets to be accepted", 30*time.Second, func() bool {
		afterSilent = p.stats()
		return afterSilent.goroutines >= afterIdle.goroutines+silent
	})

	start := time.Now()
	cs := "Endpoint=sb://" + p.addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	defer client.Close(ctx)
	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("still served")}, nil); err != nil {
		t.Fatalf("a normal client with %d idle connections and %d silent sockets held: %v", idle, silent, err)
	}
	elapsed := time.Since(start)

	t.Logf("server at start:               %v", base)
	t.Logf("with %d idle connections:    %v", idle, afterIdle)
	t.Logf("and %d silent sockets:       %v", silent, afterSilent)
	t.Logf("per idle connection: %.1f KiB RSS, %.1f goroutines; per silent socket: %.1f KiB RSS, %.1f goroutines",
		float64(afterIdle.rss-base.rss)/float64(idle)/1024, float64(afterIdle.goroutines-base.goroutines)/float64(idle),
		float64(afterSilent.rss-afterIdle.rss)/float64(silent)/1024, float64(afterSilent.goroutines-afterIdle.goroutines)/float64(silent))
	t.Logf("a Go SDK client connected, put its token, attached and sent in %v", elapsed)
}

// cbsPeer opens a connection (SASL ANONYMOUS, or PLAIN) with a session and
// a sender link to $cbs, ready to transfer.
func cbsPeer(t *testing.T, addr string, plain bool) *rawPeer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(2 * time.Minute))
	p := &rawPeer{t: t, nc: nc, rd: frames.NewReader(nc, 1<<20)}
	if plain {
		p.open()
	} else {
		p.anonymousOpen()
	}
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("$cbs"))
	p.readFrame() // attach
	p.readFrame() // flow
	return p
}

// sendUnfinished transfers size bytes of one delivery on handle 0 in
// frames of frameSize, without the last frame, then waits for the
// server's echo of a flow, so every byte has been read.
func (p *rawPeer) sendUnfinished(size, frameSize int) {
	p.t.Helper()
	chunk := make([]byte, frameSize-64)
	var b buffer.Buffer
	id, format := uint32(0), uint32(0)
	for sent := 0; sent < size; sent += len(chunk) {
		tr := &frames.Transfer{Handle: 0, Payload: chunk, More: true}
		if sent == 0 {
			tr.DeliveryID, tr.DeliveryTag, tr.MessageFormat = &id, []byte{1}, &format
		}
		b.Reset()
		if err := frames.Write(&b, frames.Frame{Body: tr}); err != nil {
			p.t.Fatal(err)
		}
		p.writeBytes(b.Bytes())
	}
	h, credit, next := uint32(0), uint32(1), uint32(1<<30)
	p.writeFrame(0, &frames.Flow{NextIncomingID: &next, IncomingWindow: 100, NextOutgoingID: 0, OutgoingWindow: 1 << 20,
		Handle: &h, DeliveryCount: &id, LinkCredit: &credit, Echo: true})
	for {
		switch b := p.readFrame().(type) {
		case *frames.Flow:
			if b.Handle != nil {
				return
			}
		case *frames.Close:
			p.t.Fatalf("connection closed: %v", b.Error)
		}
	}
}

// Unfinished put-token deliveries hold no more than MaxCBSMessageSize
// each: the bytes beyond are dropped as they arrive. Before a token a
// connection may only send small frames, after a login frames of the
// advertised size; either way a 95 MB delivery left unfinished costs the
// server almost nothing. (Before the cap, 5 such deliveries took the RSS
// from 54 MB to 1.04 GB.) What the server's heap holds for them after a GC
// is bounded far below what a server keeping the bytes would hold (all of
// them: 950 MiB, or 100 MiB under -race); so is the peak RSS, without
// -race (whose runtime pads memory on its own).
func TestUnfinishedCBSDeliveriesHoldLittle(t *testing.T) {
	const n = 5
	size := 95 << 20
	if raceEnabled {
		size = 10 << 20
	}
	p := startServerProcess(t)
	before := p.stats()
	for range n {
		cbsPeer(t, p.addr, false).sendUnfinished(size, DefaultPreAuthMaxFrameSize)
	}
	anon := p.stats()
	for range n {
		cbsPeer(t, p.addr, true).sendUnfinished(size, DefaultMaxFrameSize)
	}
	plain := p.stats()
	t.Logf("before:                                                 %v", before)
	t.Logf("%d anonymous connections, %d MiB each unfinished on $cbs: %v", n, size>>20, anon)
	t.Logf("and %d logged-in connections, %d MiB each:               %v", n, size>>20, plain)
	sent := int64(2 * n * size)
	if held := plain.heapInuse - before.heapInuse; held > unfinishedHeapBound {
		t.Errorf("the heap holds %.1f MiB more after %d unfinished $cbs deliveries (%.0f MiB sent), want at most %.0f MiB",
			mib(held), 2*n, mib(sent), mib(unfinishedHeapBound))
	}
	if before.rss > 0 && !raceEnabled {
		if grew := plain.hwm - before.rss; grew > sent/4 {
			t.Errorf("the peak RSS grew by %.1f MiB for %.0f MiB of unfinished $cbs deliveries, want at most a quarter of them",
				mib(grew), mib(sent))
		}
	}
}

// unfinishedHeapBound is what TestUnfinishedCBSDeliveriesHoldLittle lets
// the server's heap grow by: its 10 connections with their sessions and
// links, and each unfinished delivery's first MaxCBSMessageSize bytes,
// take well under 1 MiB.
const unfinishedHeapBound = 16 << 20
