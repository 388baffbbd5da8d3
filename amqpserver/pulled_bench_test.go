package amqpserver

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// BenchmarkEncodePulled encodes a pull of 100 peek-locked 1 KiB messages
// with three application properties, as the load generator sends them:
// per operation, one pull (divide by 100 for one delivery).
func BenchmarkEncodePulled(b *testing.B) {
	var props buffer.Buffer
	if err := encoding.WriteMap(&props, encoding.Map{{Key: "bench-run", Value: "6f1c2d9e"}, {Key: "bench-seq", Value: int64(7)}, {Key: "bench-sent", Value: int64(1700000000000000000)}}); err != nil {
		b.Fatal(err)
	}
	tmpl := make([]*core.Message, 100)
	for i := range tmpl {
		tmpl[i] = &core.Message{
			MessageID: "0123456789abcdef0123456789abcdef", SequenceNumber: int64(i + 1), EnqueuedTime: time.Unix(1700000000, 0).UTC(),
			LockToken: core.LockToken{byte(i), 2, 3}, LockedUntil: time.Unix(1700000060, 0).UTC(), Durable: true, Priority: 4,
			EncodedProperties: core.EncodedProperties{Codec: propertyCodecID, Bytes: props.Bytes(), Size: 60},
			Body:              make([]byte, 1024),
		}
	}
	msgs := make([]*core.Message, len(tmpl))
	b.ReportAllocs()
	for b.Loop() {
		copy(msgs, tmpl)
		encodePulled(msgs, true)
	}
}
