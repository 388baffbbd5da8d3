package amqpserver

import (
	"net"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// BenchmarkAMQPReceiveAndDeleteRaw receives a backlog in
// receive-and-delete mode with a frame-level client: 500 credits, topped
// up each time half of them are used, and a session window that is
// reopened the same way.
func BenchmarkAMQPReceiveAndDeleteRaw(b *testing.B) {
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
			nc, rd := dialRawRAD(b, addr, "q")
			m := startMeter(b, st)
			var out buffer.Buffer
			granted := uint32(0) // received count when credit was last granted
			for received := uint32(0); received < uint32(b.N); {
				fr, err := rd.ReadFrame()
				if err != nil {
					b.Fatal(err)
				}
				if t, ok := fr.Body.(*frames.Transfer); !ok || t.More {
					continue
				}
				received++
				if received-granted < rawCredit/2 {
					continue
				}
				granted = received
				credit, h := uint32(rawCredit), uint32(0)
				f := &frames.Flow{NextIncomingID: &received, IncomingWindow: 2 * rawCredit, OutgoingWindow: 100,
					Handle: &h, DeliveryCount: &received, LinkCredit: &credit}
				out.Reset()
				if err := frames.Write(&out, frames.Frame{Body: f}); err != nil {
					b.Fatal(err)
				}
				if _, err := nc.Write(out.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
			m.stop(b.N)
		})
	}
}

// dialRawRAD opens a connection with one receive-and-delete receiver on
// source and grants it rawCredit.
func dialRawRAD(b *testing.B, addr, source string) (net.Conn, *frames.Reader) {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	rd := frames.NewReader(nc, 1<<20)
	var out buffer.Buffer
	h := frames.AMQPHeader.Bytes()
	out.Append(h[:])
	first := frames.ReceiverSettleModeFirst
	zero, credit, handle := uint32(0), uint32(rawCredit), uint32(0)
	for _, body := range []frames.Body{
		&frames.Open{ContainerID: "raw", MaxFrameSize: 1 << 20, ChannelMax: 1},
		&frames.Begin{IncomingWindow: 2 * rawCredit, OutgoingWindow: 100, HandleMax: 1},
		&frames.Attach{Name: "raw-rad", Handle: 0, Role: frames.RoleReceiver, RcvSettleMode: &first,
			Source: &frames.Source{Address: source}, Target: &frames.Target{}},
		&frames.Flow{NextIncomingID: &zero, IncomingWindow: 2 * rawCredit, OutgoingWindow: 100,
			Handle: &handle, DeliveryCount: &zero, LinkCredit: &credit},
	} {
		if err := frames.Write(&out, frames.Frame{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := nc.Write(out.Bytes()); err != nil {
		b.Fatal(err)
	}
	if _, err := rd.ReadProtocolHeader(); err != nil {
		b.Fatal(err)
	}
	return nc, rd
}
