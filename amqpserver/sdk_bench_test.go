package amqpserver

import (
	"testing"

	"github.com/Azure/go-amqp"
)

// BenchmarkAMQPSendManyLinks is BenchmarkAMQPSendPipelined spread over 8
// connections with one sender link each (32 goroutines per link). go-amqp
// writes one link's transfers one at a time, each waiting for its socket
// write; comparing the two tells whether that client-side serialization
// or the server limits the pipelined send rate.
func BenchmarkAMQPSendManyLinks(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			st := st.open(b)
			addr, _ := newBenchServer(b, st)
			const links, perLink = 8, 32
			snds := make([]*amqp.Sender, links)
			for i := range snds {
				s, err := benchSession(b, addr).NewSender(b.Context(), "q", nil)
				if err != nil {
					b.Fatal(err)
				}
				snds[i] = s
			}
			m := startMeter(b, st)
			sendConcurrently(b, snds, perLink)
			m.stop(b.N)
		})
	}
}
