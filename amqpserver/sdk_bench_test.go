package amqpserver

import (
	"sync"
	"testing"
	"time"

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
			addr, _ := newBenchServer(b, st.open(b))
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
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
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
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
		})
	}
}
