package amqpserver

import (
	"net"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// rawPeer is a scripted client speaking frames directly, for what a real
// client never sends.
type rawPeer struct {
	t  testing.TB
	nc net.Conn
	rd *frames.Reader
}

func (ts *testServer) rawDial(t testing.TB) *rawPeer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawPeer{t: t, nc: nc, rd: frames.NewReader(nc, 1<<20)}
}

func (p *rawPeer) writeBytes(b []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

func (p *rawPeer) writeHeader(h frames.ProtocolHeader) {
	b := h.Bytes()
	p.writeBytes(b[:])
}

func (p *rawPeer) writeFrame(ch uint16, body frames.Body) {
	p.t.Helper()
	var b buffer.Buffer
	if err := frames.Write(&b, frames.Frame{Channel: ch, Body: body}); err != nil {
		p.t.Fatal(err)
	}
	p.writeBytes(b.Bytes())
}

func (p *rawPeer) readHeader() frames.ProtocolHeader {
	p.t.Helper()
	h, err := p.rd.ReadProtocolHeader()
	if err != nil {
		p.t.Fatalf("reading protocol header: %v", err)
	}
	return h
}

// readFrame reads the next non-heartbeat frame.
func (p *rawPeer) readFrame() frames.Body {
	p.t.Helper()
	for {
		fr, err := p.rd.ReadFrame()
		if err != nil {
			p.t.Fatalf("reading frame: %v", err)
		}
		if fr.Body != nil {
			return fr.Body
		}
	}
}

// open runs SASL PLAIN with the root key and exchanges open frames.
func (p *rawPeer) open() {
	p.t.Helper()
	p.writeHeader(frames.SASLHeader)
	if h := p.readHeader(); h != frames.SASLHeader {
		p.t.Fatalf("got %v, want SASL header", h)
	}
	p.readFrame() // mechanisms
	p.writeFrame(0, &frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00" + testKeyName + "\x00" + testKey)})
	if o, ok := p.readFrame().(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
		p.t.Fatalf("SASL outcome %+v", o)
	}
	p.writeHeader(frames.AMQPHeader)
	if h := p.readHeader(); h != frames.AMQPHeader {
		p.t.Fatalf("got %v, want AMQP header", h)
	}
	p.writeFrame(0, &frames.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 10})
	if _, ok := p.readFrame().(*frames.Open); !ok {
		p.t.Fatal("no open")
	}
}

// expectClose reads frames until a close and returns its error.
func (p *rawPeer) expectClose() *frames.Error {
	p.t.Helper()
	for {
		if c, ok := p.readFrame().(*frames.Close); ok {
			return c.Error
		}
	}
}

func beginFrame() *frames.Begin {
	return &frames.Begin{IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 10}
}

// senderAttach attaches handle 0 as a sender to target.
func senderAttach(target string) *frames.Attach {
	return &frames.Attach{Name: "raw-sender", Handle: 0, Role: frames.RoleSender,
		Source: &frames.Source{}, Target: &frames.Target{Address: target}}
}

// dataSection encodes a message made of one data section of n bytes.
func dataSection(t testing.TB, n int) []byte {
	t.Helper()
	var b buffer.Buffer
	m := &frames.Message{Data: [][]byte{make([]byte, n)}}
	if err := m.MarshalAMQP(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
