package amqpserver

import (
	"sync"
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
			body := make([]byte, 1024)
			work := make(chan struct{}, links*perLink)
			var wg sync.WaitGroup
			m := startMeter(b, st)
			for _, snd := range snds {
				for range perLink {
					wg.Go(func() {
						for range work {
							if err := snd.Send(b.Context(), amqp.NewMessage(body), nil); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			m.stop(b.N)
		})
	}
}
