package amqpserver

import (
	"net"
	"sync"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// BenchmarkAMQPReceiveCompleteRaw is BenchmarkAMQPReceiveComplete with
// go-amqp replaced by a frugal frame-level client: 500 credits in
// peek-lock mode, one accepted disposition per delivery (as go-amqp
// sends them) written together with the others ready, 256 accepts
// unanswered at most, credit topped up as accepts are answered. Its
// ratio to BenchmarkCoreBaseline/receive-complete is the cost of the
// AMQP front itself.
func BenchmarkAMQPReceiveCompleteRaw(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			st := st.open(b)
			addr, br := newBenchServer(b, st)
			body := make([]byte, 1024)
			for sent := 0; sent < b.N; sent += 500 {
				msgs := make([]*core.Message, min(b.N-sent, 500))
				for i := range msgs {
					msgs[i] = &core.Message{Body: body}
				}
				if _, err := br.Send(b.Context(), "q", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			rc := dialRawReceiver(b, addr, "q")
			m := startMeter(b, st)
			rc.run(b, uint32(b.N))
			m.stop(b.N)
		})
	}
}

const rawCredit = 500

// rawReceiver is the client of BenchmarkAMQPReceiveCompleteRaw.
type rawReceiver struct {
	nc net.Conn
	rd *frames.Reader

	mu       sync.Mutex
	wake     chan struct{} // (cap 1) received or answered moved
	received uint32        // transfers read (= delivery ids 0..received-1)
	answered uint32        // accepts the server answered
	failed   error
}

func dialRawReceiver(b *testing.B, addr, source string) *rawReceiver {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	rc := &rawReceiver{nc: nc, rd: frames.NewReader(nc, 1<<20), wake: make(chan struct{}, 1)}
	var out buffer.Buffer
	h := frames.AMQPHeader.Bytes()
	out.Append(h[:])
	second := frames.ReceiverSettleModeSecond
	for _, body := range []frames.Body{
		&frames.Open{ContainerID: "raw", MaxFrameSize: 1 << 20, ChannelMax: 1},
		&frames.Begin{IncomingWindow: 1 << 30, OutgoingWindow: 1 << 30, HandleMax: 1},
		&frames.Attach{Name: "raw-receiver", Handle: 0, Role: frames.RoleReceiver, RcvSettleMode: &second,
			Source: &frames.Source{Address: source}, Target: &frames.Target{}},
	} {
		if err := frames.Write(&out, frames.Frame{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := nc.Write(out.Bytes()); err != nil {
		b.Fatal(err)
	}
	if _, err := rc.rd.ReadProtocolHeader(); err != nil {
		b.Fatal(err)
	}
	for range 3 { // open, begin, attach
		if _, err := rc.rd.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
	return rc
}

// run grants credit and accepts deliveries until n accepts are answered.
func (rc *rawReceiver) run(b *testing.B, n uint32) {
	go rc.read(n)
	var out buffer.Buffer
	accepted := uint32(0)
	granted := ^uint32(0) // answered count when credit was last granted
	for {
		rc.mu.Lock()
		received, answered, failed := rc.received, rc.answered, rc.failed
		rc.mu.Unlock()
		if failed != nil {
			b.Fatal(failed)
		}
		if answered >= n {
			return
		}
		out.Reset()
		for ; accepted < received && accepted-answered < benchInFlight; accepted++ {
			d := &frames.Disposition{Role: frames.RoleReceiver, First: accepted, State: &frames.Accepted{}}
			if err := frames.Write(&out, frames.Frame{Body: d}); err != nil {
				b.Fatal(err)
			}
		}
		if answered != granted {
			// Credit for rawCredit deliveries beyond those answered.
			granted = answered
			dc, credit, h := received, answered+rawCredit-received, uint32(0)
			f := &frames.Flow{NextIncomingID: &dc, IncomingWindow: 1 << 30, OutgoingWindow: 1 << 30,
				Handle: &h, DeliveryCount: &dc, LinkCredit: &credit}
			if err := frames.Write(&out, frames.Frame{Body: f}); err != nil {
				b.Fatal(err)
			}
		}
		if out.Len() > 0 {
			if _, err := rc.nc.Write(out.Bytes()); err != nil {
				b.Fatal(err)
			}
			continue
		}
		<-rc.wake
	}
}

// read counts transfers and answered accepts until n are answered.
func (rc *rawReceiver) read(n uint32) {
	for {
		fr, err := rc.rd.ReadFrame()
		rc.mu.Lock()
		switch f := fr.Body.(type) {
		case *frames.Transfer:
			if !f.More {
				rc.received++
			}
		case *frames.Disposition:
			last := f.First
			if f.Last != nil {
				last = *f.Last
			}
			rc.answered += last - f.First + 1
		}
		if err != nil {
			rc.failed = err
		}
		done := rc.answered >= n || err != nil
		rc.mu.Unlock()
		select {
		case rc.wake <- struct{}{}:
		default:
		}
		if done {
			return
		}
	}
}
