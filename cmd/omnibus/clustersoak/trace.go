package clustersoak

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/cmd/omnibus/bench"
)

// trace records every delivery and completion outcome of a run in
// <dir>/deliveries.log, one line each: when, which receiver (and which
// of its clients), the ledger's sequence number, the broker's sequence
// number, delivery count and lock token. A run that counts a message
// delivered again can then be read back: the same broker sequence
// number twice is one stored message handed out twice; two numbers are
// a message stored twice.
type trace struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

func newTrace(path string) (*trace, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &trace{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

// line writes one record; a nil trace writes nothing.
func (t *trace) line(format string, args ...any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%s ", time.Now().UTC().Format("15:04:05.000000"))
	fmt.Fprintf(t.w, format, args...)
	t.w.WriteByte('\n')
}

func (t *trace) close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.w.Flush(); err != nil {
		t.f.Close()
		return err
	}
	return t.f.Close()
}

// traceLeft records what the queue still holds (peeked, up to a
// thousand messages) after a drain that did not finish: a message handed
// out (delivery count above 0) whose lock keeps it from the receivers,
// or one never handed out while the receivers waited.
func (ld *load) traceLeft(ctx context.Context) {
	if ld.trace == nil {
		return
	}
	cl, err := azservicebus.NewClientFromConnectionString(ld.conn, nil)
	if err != nil {
		ld.trace.line("left: %v", err)
		return
	}
	defer cl.Close(context.Background())
	ld.traceLeftOf(ctx, cl, queueName)
	if ld.c.Groups > 0 {
		ld.traceLeftOf(ctx, cl, partitionedQueueName)
	}
	if ld.c.Groups > 0 && ld.c.Sessions > 0 {
		ld.traceLeftOf(ctx, cl, sessionQueueName)
	}
}

// traceLeftOf records what queue still holds.
func (ld *load) traceLeftOf(ctx context.Context, cl *azservicebus.Client, queue string) {
	r, err := cl.NewReceiverForQueue(queue, nil)
	if err != nil {
		ld.trace.line("left: %v", err)
		return
	}
	defer r.Close(context.Background())
	for n := 0; n < 1000; {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msgs, err := r.PeekMessages(pctx, 100, nil)
		cancel()
		if err != nil {
			ld.trace.line("left: %v", err)
			return
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			_, seq, _, _ := bench.ReadStamp(m.ApplicationProperties)
			ld.trace.line("left %s seq=%d bseq=%d count=%d key=%s", queue, seq, *m.SequenceNumber, m.DeliveryCount, keyOf(m))
		}
		n += len(msgs)
	}
}
