package amqpserver

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// BenchmarkAMQPSendRaw is BenchmarkAMQPSendPipelined with go-amqp
// replaced by a frugal client speaking frames: it writes pre-encoded
// transfers, as many per write as credit, session window and 256
// unanswered deliveries allow, and reads the dispositions. Almost all of
// the CPU is then the server's, so its ratio to BenchmarkCoreBaseline/send
// is the cost of the AMQP front itself.
func BenchmarkAMQPSendRaw(b *testing.B) {
	benchSendRaw(b, &frames.Message{Data: [][]byte{make([]byte, 1024)}})
}

// BenchmarkAMQPSendRawProps is BenchmarkAMQPSendRaw with three
// application properties on each message, the way most applications send
// (and the way omnibus-tools bench stamps its messages): a string and two longs.
func BenchmarkAMQPSendRawProps(b *testing.B) {
	benchSendRaw(b, &frames.Message{
		ApplicationProperties: encoding.Map{
			{Key: "bench-run", Value: "6f1c2d9e4b7a4c0e"},
			{Key: "bench-seq", Value: int64(123456)},
			{Key: "bench-sent", Value: int64(1795000000123456789)},
		},
		Data: [][]byte{make([]byte, 1024)},
	})
}

// BenchmarkAMQPSendOneByOne is BenchmarkAMQPSendRaw with one delivery in
// flight: each send waits for the disposition of the one before, as on a
// lightly loaded broker. ns/op is the round trip (commit and fsync
// included), cpu-µs/msg what the broker's goroutine hand-offs, system
// calls and fsync cost when nothing is batched.
func BenchmarkAMQPSendOneByOne(b *testing.B) {
	benchSendRawWindow(b, &frames.Message{Data: [][]byte{make([]byte, 1024)}}, 1)
}

// benchSendRaw sends b.N copies of msg through a rawSender on each store.
func benchSendRaw(b *testing.B, msg *frames.Message) {
	benchSendRawWindow(b, msg, benchInFlight)
}

// benchSendRawWindow is benchSendRaw with at most window deliveries
// unanswered.
func benchSendRawWindow(b *testing.B, msg *frames.Message, window uint32) {
	var enc buffer.Buffer
	if err := msg.MarshalAMQP(&enc); err != nil {
		b.Fatal(err)
	}
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			st := st.open(b)
			addr, _ := newBenchServer(b, st)
			rc := dialRawSender(b, addr, "q")
			rc.window = window
			m := startMeter(b, st)
			rc.run(b, enc.Bytes(), b.N)
			m.stop(b.N)
		})
	}
}

// rawSender is the client of BenchmarkAMQPSendRaw: one connection, one
// session, one sender link on handle 0 with rcv-settle-mode first.
type rawSender struct {
	nc net.Conn
	rd *frames.Reader

	mu      sync.Mutex
	wake    chan struct{} // (cap 1) answered, linkLimit or sessLimit moved
	limits  struct{ link, sess uint32 }
	answers atomic.Uint32
	window  uint32 // deliveries sent and not yet answered, at most
}

func dialRawSender(b *testing.B, addr, target string) *rawSender {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	rc := &rawSender{nc: nc, rd: frames.NewReader(nc, 1<<20), wake: make(chan struct{}, 1), window: benchInFlight}
	var out buffer.Buffer
	h := frames.AMQPHeader.Bytes()
	out.Append(h[:])
	zero := uint32(0)
	for _, body := range []frames.Body{
		&frames.Open{ContainerID: "raw", MaxFrameSize: 1 << 20, ChannelMax: 1},
		&frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 1},
		&frames.Attach{Name: "raw-sender", Handle: 0, Role: frames.RoleSender, InitialDeliveryCount: &zero,
			Source: &frames.Source{}, Target: &frames.Target{Address: target}},
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
	// Open, begin, attach, then the flow granting credit.
	for rc.limits.link == 0 {
		fr, err := rc.rd.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		rc.handle(fr.Body)
	}
	return rc
}

// handle applies one frame from the server: a flow moves the credit and
// session-window limits, a disposition answers deliveries.
func (rc *rawSender) handle(body frames.Body) {
	switch f := body.(type) {
	case *frames.Begin:
		rc.mu.Lock()
		rc.limits.sess = f.IncomingWindow
		rc.mu.Unlock()
	case *frames.Flow:
		rc.mu.Lock()
		if f.NextIncomingID != nil {
			rc.limits.sess = *f.NextIncomingID + f.IncomingWindow
		}
		if f.LinkCredit != nil && f.DeliveryCount != nil {
			rc.limits.link = *f.DeliveryCount + *f.LinkCredit
		}
		rc.mu.Unlock()
	case *frames.Disposition:
		last := f.First
		if f.Last != nil {
			last = *f.Last
		}
		rc.answers.Add(last - f.First + 1)
	default:
		return
	}
	select {
	case rc.wake <- struct{}{}:
	default:
	}
}

// run sends n deliveries of payload and returns once all are answered.
func (rc *rawSender) run(b *testing.B, payload []byte, n int) {
	done := make(chan error, 1)
	go func() {
		for rc.answers.Load() < uint32(n) {
			fr, err := rc.rd.ReadFrame()
			if err != nil {
				done <- err
				return
			}
			rc.handle(fr.Body)
		}
		done <- nil
	}()
	var out buffer.Buffer
	format := uint32(0)
	for sent := uint32(0); sent < uint32(n); {
		rc.mu.Lock()
		allowed := min(rc.limits.link, rc.limits.sess, rc.answers.Load()+rc.window, uint32(n)) - sent
		rc.mu.Unlock()
		if int32(allowed) <= 0 {
			<-rc.wake
			continue
		}
		out.Reset()
		for range allowed {
			id := sent
			t := &frames.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{byte(id), byte(id >> 8), byte(id >> 16), byte(id >> 24)},
				MessageFormat: &format, Payload: payload}
			if err := frames.Write(&out, frames.Frame{Body: t}); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		if _, err := rc.nc.Write(out.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
