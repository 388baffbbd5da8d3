package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	ts := newTestServer(t, nil)
	good := ts.session(t)
	snd := mustSender(t, good, "q")

	p := ts.rawDial(t)
	p.open()
	// A frame whose body is a list, not a performative.
	p.writeBytes([]byte{0, 0, 0, 12, 2, 0, 0, 0, 0xc0, 0x01, 0x00, 0x00})
	if e := p.expectClose(); e == nil || e.Condition != frames.CondDecodeError {
		t.Fatalf("close error = %v, want amqp:decode-error", e)
	}
	mustSend(t, snd, "still works")
}

func TestGarbageInsteadOfHeader(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.writeBytes([]byte("GET / HTTP/1.1\r\n\r\n"))
	if _, err := p.rd.ReadProtocolHeader(); err == nil {
		if _, err := p.rd.ReadFrame(); err == nil {
			t.Fatal("connection still open after garbage")
		}
	}
}

func TestFrameTooLarge(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	// Announce a frame far above the advertised 64 KiB.
	p.writeBytes([]byte{0x10, 0, 0, 0, 2, 0, 0, 0})
	if e := p.expectClose(); e == nil || e.Condition != frames.CondFrameSizeTooSmall {
		t.Fatalf("close error = %v, want amqp:frame-size-too-small", e)
	}
}

func TestIllegalFrameBeforeBegin(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.open()
	p.writeFrame(3, senderAttach("q"))
	if e := p.expectClose(); e == nil || e.Condition != frames.CondNotAllowed {
		t.Fatalf("close error = %v, want amqp:not-allowed", e)
	}
}

func TestIdleTimeout(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	p := ts.rawDial(t)
	p.open()
	if e := p.expectClose(); e == nil || e.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("close error = %v, want amqp:resource-limit-exceeded", e)
	}
}

func TestHeartbeats(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.writeHeader(frames.SASLHeader)
	p.readHeader()
	p.readFrame()
	p.writeFrame(0, &frames.SASLInit{Mechanism: "ANONYMOUS"})
	p.readFrame()
	p.writeHeader(frames.AMQPHeader)
	p.readHeader()
	p.writeFrame(0, &frames.Open{ContainerID: "hb", IdleTimeOut: 1000})
	p.readFrame()
	fr, err := p.rd.ReadFrame()
	if err != nil || fr.Body != nil {
		t.Fatalf("got %+v, %v; want an empty heartbeat frame", fr, err)
	}
}

func TestShutdownClosesConnections(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.dial(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("client connection still open after Shutdown")
	}
	var ae *amqp.ConnError
	if err := c.Err(); !errors.As(err, &ae) || ae.RemoteErr == nil || ae.RemoteErr.Condition != amqp.ErrCondConnectionForced {
		t.Errorf("client saw %v, want amqp:connection:forced", err)
	}
}

func TestManyConnections(t *testing.T) {
	ts := newTestServer(t, nil)
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i := range n {
		wg.Go(func() {
			c, err := amqp.Dial(ctx, "amqp://"+ts.addr, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey)})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			s, err := c.NewSession(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			snd, err := s.NewSender(ctx, "q", nil)
			if err != nil {
				errs <- err
				return
			}
			errs <- snd.Send(ctx, amqp.NewMessage([]byte(fmt.Sprint(i))), nil)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != n {
		t.Errorf("active = %d, want %d", c.Active, n)
	}
}

func TestMaxConnections(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MaxConnections = 1 })
	first := ts.dial(t)
	mustSession(t, first)
	p := ts.rawDial(t)
	p.open()
	if e := p.expectClose(); e == nil || e.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("close error = %v, want amqp:resource-limit-exceeded", e)
	}
}
