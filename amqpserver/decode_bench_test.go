package amqpserver

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// sendShapes are the messages of the send benchmarks, 1 KiB each: the
// load generator's (a durable header, its three application properties,
// one data section) and an SDK's (a message-id, content type and
// subject as well, two properties of its own).
func sendShapes(tb testing.TB) []struct {
	name string
	enc  []byte
} {
	tb.Helper()
	body := [][]byte{bytes.Repeat([]byte{'x'}, 1024)}
	shapes := []struct {
		name string
		m    *frames.Message
	}{
		{"bench", &frames.Message{Header: &frames.MessageHeader{Durable: true, Priority: frames.DefaultPriority},
			ApplicationProperties: encoding.Map{{Key: "bench-run", Value: "6f1c2d9e0a3b4c5d"}, {Key: "bench-seq", Value: int64(70000)},
				{Key: "bench-sent", Value: int64(1700000000000000000)}},
			Data: body}},
		{"sdk", &frames.Message{
			Properties:            &frames.MessageProperties{MessageID: "5f0b3c5e-1f5e-4a51-9d43-2d0a6c1e8f00", ContentType: "application/json", Subject: "order"},
			ApplicationProperties: encoding.Map{{Key: "tenant", Value: "contoso"}, {Key: "attempt", Value: int32(1)}},
			Data:                  body}},
	}
	out := make([]struct {
		name string
		enc  []byte
	}, len(shapes))
	for i, s := range shapes {
		var w buffer.Buffer
		if err := s.m.MarshalAMQP(&w); err != nil {
			tb.Fatal(err)
		}
		out[i].name, out[i].enc = s.name, w.Bytes()
	}
	return out
}

// BenchmarkDecodeSend is what the front does with a sent message's bytes
// before core sees it: appendMessages, the decode into reused structures
// and the mapping to a core.Message (whose allocation it includes).
// Under callgrind, toggle collection on this function (GOGC=off):
//
//	go test -c -o /tmp/amqpserver.test ./amqpserver
//	GOGC=off valgrind --tool=callgrind --toggle-collect='*BenchmarkDecodeSend*' \
//		/tmp/amqpserver.test -test.run='^$' -test.bench='DecodeSend/bench' -test.benchtime=2000x
func BenchmarkDecodeSend(b *testing.B) {
	for _, s := range sendShapes(b) {
		b.Run(s.name, func(b *testing.B) {
			var pd propsDecoder
			dst := make([]*core.Message, 0, 1)
			b.ReportAllocs()
			for b.Loop() {
				msgs, err := appendMessages(dst[:0], s.enc, 0, &pd)
				if err != nil || len(msgs) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}
