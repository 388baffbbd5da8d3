package amqpserver

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// handshakePrefix is what a client sends to get an open connection
// without a validator: SASL ANONYMOUS, the AMQP header and open.
func handshakePrefix(t testing.TB) []byte {
	var b buffer.Buffer
	frames.WriteProtocolHeader(&b, frames.SASLHeader)
	if err := frames.Write(&b, frames.Frame{Body: &frames.SASLInit{Mechanism: "ANONYMOUS"}}); err != nil {
		t.Fatal(err)
	}
	frames.WriteProtocolHeader(&b, frames.AMQPHeader)
	if err := frames.Write(&b, frames.Frame{Body: &frames.Open{ContainerID: "fuzz"}}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// encodeFrames encodes frames on channel 0.
func encodeFrames(t testing.TB, bodies ...frames.Body) []byte {
	var b buffer.Buffer
	for _, body := range bodies {
		if err := frames.Write(&b, frames.Frame{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// FuzzConn feeds arbitrary bytes to an open connection. The connection
// must end (no hang) without a panic, whatever the input.
func FuzzConn(f *testing.F) {
	id, format, one := uint32(0), uint32(0), uint32(1)
	h := uint32(0)
	second := frames.ReceiverSettleModeSecond
	f.Add(encodeFrames(f, beginFrame(), senderAttach("q"),
		&frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, Payload: dataSection(f, 10)}))
	f.Add(encodeFrames(f, beginFrame(),
		&frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver, RcvSettleMode: &second, Source: &frames.Source{Address: "q"}, Target: &frames.Target{}},
		&frames.Flow{IncomingWindow: 10, OutgoingWindow: 10, Handle: &h, DeliveryCount: &id, LinkCredit: &one, Drain: true},
		&frames.Disposition{Role: frames.RoleReceiver, First: 0, Last: &one, Settled: true, State: &frames.Accepted{}}))
	f.Add(encodeFrames(f, beginFrame(), senderAttach("$cbs"),
		&frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{1}, MessageFormat: &format, More: true, Payload: []byte{0, 0x53}}))
	f.Add([]byte{0, 0, 0, 12, 2, 0, 0, 0, 0xc0, 0x01, 0x00, 0x00})

	env := coretest.New(f)
	env.MustCreate(f, core.Entity{Kind: core.KindQueue, Name: "q"})
	obs, logs := observer.New(zapcore.ErrorLevel)
	srv, err := New(Config{Broker: env.Broker, Logger: zap.New(obs), IdleTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	prefix := handshakePrefix(f)
	f.Cleanup(srv.cancel)

	f.Fuzz(func(t *testing.T, input []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			newConn(srv, server).serve(srv.ctx)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(append(append([]byte(nil), prefix...), input...))
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("connection did not end after its peer closed")
		}
		for _, e := range logs.TakeAll() {
			if strings.Contains(e.Message, "panic") {
				t.Fatalf("%s: %v", e.Message, e.ContextMap())
			}
		}
	})
}
