package amqpserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core/sas"
)

// anonymousOpen runs SASL ANONYMOUS and exchanges open frames on a raw
// peer.
func (p *rawPeer) anonymousOpen() {
	p.t.Helper()
	p.writeHeader(frames.SASLHeader)
	if h := p.readHeader(); h != frames.SASLHeader {
		p.t.Fatalf("got %v, want SASL header", h)
	}
	p.readFrame() // mechanisms
	p.writeFrame(0, &frames.SASLInit{Mechanism: "ANONYMOUS"})
	if o, ok := p.readFrame().(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
		p.t.Fatalf("SASL outcome %+v", o)
	}
	p.writeHeader(frames.AMQPHeader)
	if h := p.readHeader(); h != frames.AMQPHeader {
		p.t.Fatalf("got %v, want AMQP header", h)
	}
	p.writeFrame(0, &frames.Open{ContainerID: "raw-anon", MaxFrameSize: 65536, ChannelMax: 100})
	if _, ok := p.readFrame().(*frames.Open); !ok {
		p.t.Fatal("no open")
	}
}

// expectEOF reads until the server closes the socket.
func (p *rawPeer) expectEOF() {
	p.t.Helper()
	for {
		if _, err := p.rd.ReadFrame(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") {
				p.t.Fatalf("read: %v, want the socket closed", err)
			}
			return
		}
	}
}

// A connection that never presents a credential is closed at the
// authentication deadline with amqp:unauthorized-access; a silent socket
// is dropped; connections with a SASL login or a valid token stay.
func TestNoCredentialClosedAtAuthTimeout(t *testing.T) {
	// Long enough for the put-token below under any load, short enough
	// to wait for.
	ts := newTestServer(t, func(c *Config) { c.AuthTimeout = 2 * time.Second })
	plain := ts.session(t)
	plainSnd := mustSender(t, plain, "q")
	anonWithToken := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	aud := "amqp://" + ts.addr + "/q"
	if st, desc := putToken(t, anonWithToken, aud, sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))); st != 202 {
		t.Fatalf("put-token: %d %s", st, desc)
	}

	silent := ts.rawDial(t)
	p := ts.rawDial(t)
	p.anonymousOpen()
	if e := p.expectClose(); e == nil || e.Condition != frames.CondUnauthorizedAccess || !strings.Contains(e.Description, "token") {
		t.Fatalf("close = %v, want amqp:unauthorized-access about the missing token", e)
	}
	silent.expectEOF()

	// Both credentialed connections outlived the deadline.
	mustSend(t, plainSnd, "plain still works")
	mustSend(t, mustSender(t, mustSession(t, anonWithToken), "q"), "token still works")
}

// Before a credential only small frames pass; after a token, frames up
// to the advertised max-frame-size do.
func TestPreAuthFrameLimit(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.PreAuthMaxFrameSize = 4096 })
	p := ts.rawDial(t)
	p.anonymousOpen()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, &frames.Transfer{Handle: 0, Payload: make([]byte, 5000)})
	if e := p.expectClose(); e == nil || e.Condition != frames.CondFrameSizeTooSmall {
		t.Fatalf("close = %v, want amqp:frame-size-too-small", e)
	}

	// The same 60 KiB frame is fine once a token was accepted.
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	aud := "amqp://" + ts.addr + "/q"
	if st, desc := putToken(t, c, aud, sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))); st != 202 {
		t.Fatalf("put-token: %d %s", st, desc)
	}
	snd := mustSender(t, mustSession(t, c), "q")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := snd.Send(ctx, amqp.NewMessage(make([]byte, 60<<10)), nil); err != nil {
		t.Fatalf("60 KiB send after the token: %v", err)
	}
}

// A put-token request larger than MaxCBSMessageSize is rejected with
// amqp:link:message-size-exceeded however it is split, and the
// connection goes on to put a proper token.
func TestCBSMessageCapped(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.rawDial(t)
	p.anonymousOpen()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, senderAttach("$cbs"))
	a, ok := p.readFrame().(*frames.Attach)
	if !ok || a.MaxMessageSize != DefaultMaxCBSMessageSize {
		t.Fatalf("attach = %+v, want max-message-size %d", a, DefaultMaxCBSMessageSize)
	}
	p.readFrame() // flow with credit
	id := uint32(0)
	for i := range 20 { // 20 frames of 4 KiB: 80 KiB
		tr := &frames.Transfer{Handle: 0, Payload: make([]byte, 4096), More: i < 19}
		if i == 0 {
			tr.DeliveryID, tr.DeliveryTag = &id, []byte{1}
			format := uint32(0)
			tr.MessageFormat = &format
		}
		p.writeFrame(0, tr)
	}
	for {
		body := p.readFrame()
		d, ok := body.(*frames.Disposition)
		if !ok {
			continue
		}
		r, ok := d.State.(*frames.Rejected)
		if !ok || r.Error == nil || r.Error.Condition != frames.CondMessageSizeExceeded {
			t.Fatalf("disposition state = %#v, want rejected with amqp:link:message-size-exceeded", d.State)
		}
		break
	}
}

// Without a token an attach is refused the same way whether the entity
// exists or not, and a put-token with a bad token gets 401 for a missing
// entity too: names cannot be probed.
func TestAnonymousLearnsNothingAboutEntities(t *testing.T) {
	ts := newTestServer(t, nil)
	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	s := mustSession(t, c)
	for _, name := range []string{"q", "missing", "q/$management", "missing/$management"} {
		_, err := s.NewSender(t.Context(), name, nil)
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
			t.Errorf("attach to %q without a token: %v, want unauthorized-access", name, err)
		}
	}
	bad := "SharedAccessSignature sr=x&sig=bad&se=9999999999&skn=" + testKeyName
	for _, name := range []string{"q", "missing"} {
		if st, desc := putToken(t, c, "amqp://"+ts.addr+"/"+name, bad); st != 401 {
			t.Errorf("bad token for %q: %d %s, want 401", name, st, desc)
		}
	}
	// With a token for the namespace, a missing entity is reported as such.
	ns := "amqp://" + ts.addr + "/"
	if st, desc := putToken(t, c, ns, sas.Sign(ns, testKeyName, testKey, time.Now().Add(time.Hour))); st != 202 {
		t.Fatalf("namespace token: %d %s", st, desc)
	}
	_, err := s.NewSender(t.Context(), "missing", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotFound {
		t.Errorf("attach to a missing entity with a token: %v, want not-found", err)
	}
}

// Before a credential a connection holds only PreAuthMaxLinks links and
// sessions.
func TestPreAuthLinkAndSessionCaps(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.PreAuthMaxLinks = 2 })
	p := ts.rawDial(t)
	p.anonymousOpen()
	p.writeFrame(0, beginFrame())
	p.readFrame()
	for h := range uint32(3) {
		a := senderAttach("$cbs")
		a.Handle = h
		p.writeFrame(0, a)
		if _, ok := p.readFrame().(*frames.Attach); !ok {
			t.Fatal("no attach reply")
		}
		body := p.readFrame()
		switch d := body.(type) {
		case *frames.Flow:
			if h == 2 {
				t.Fatalf("third link attached (flow %+v), want it refused", d)
			}
		case *frames.Detach:
			if h < 2 || d.Error == nil || d.Error.Condition != frames.CondResourceLimitExceeded {
				t.Fatalf("link %d: detach %+v, want only the third refused with resource-limit-exceeded", h, d.Error)
			}
		default:
			t.Fatalf("link %d: got %T", h, body)
		}
	}
	p.writeFrame(1, beginFrame())
	p.readFrame()
	p.writeFrame(2, beginFrame())
	if e := p.expectClose(); e == nil || e.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("close = %v, want resource-limit-exceeded for the third session", e)
	}
}
