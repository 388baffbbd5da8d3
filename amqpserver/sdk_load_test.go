package amqpserver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
)

// Load tests through the Go SDK: many concurrent sends on one link, a
// large message, many connections at once.

// TestSDKLoadConcurrentSendsOneSender sends 1,000 messages from 1,000
// goroutines sharing one Sender and receives every one of them.
func TestSDKLoadConcurrentSendsOneSender(t *testing.T) {
	const n = 1000
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "q")
	sendBodies(t, snd, "warm-up") // attach the link before the burst
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs <- snd.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "m%04d", i)}, nil)
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed++; failed <= 3 {
				t.Errorf("SendMessage: %v", err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d concurrent sends failed", failed, n)
	}

	rcv := e.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	seen := make(map[string]bool, n+1)
	for len(seen) < n+1 {
		msgs, err := rcv.ReceiveMessages(ctx, 500, nil)
		if err != nil {
			t.Fatalf("ReceiveMessages after %d: %v", len(seen), err)
		}
		for _, m := range msgs {
			if seen[string(m.Body)] {
				t.Fatalf("%q received twice", m.Body)
			}
			seen[string(m.Body)] = true
		}
	}
	for i := range n {
		if b := fmt.Sprintf("m%04d", i); !seen[b] {
			t.Errorf("%s never received", b)
		}
	}
	if c, _ := e.Broker.Counts("q"); c.Total != 0 {
		t.Errorf("%d messages left after receiving all", c.Total)
	}
}

// TestSDKLoadLargeMessage sends a 200 KiB message (several frames each
// way) and gets it back byte for byte.
func TestSDKLoadLargeMessage(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	body := make([]byte, 200*1024)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, queue := range []string{"q", "small"} {
		if err := e.sender(t, queue).SendMessage(ctx, &azservicebus.Message{Body: body}, nil); err != nil {
			t.Fatalf("SendMessage(200 KiB) to %s: %v", queue, err)
		}
		rcv := e.receiver(t, queue, nil)
		m := receiveN(t, rcv, 1)[0]
		if !bytes.Equal(m.Body, body) {
			t.Fatalf("%s: received %d bytes, not the 200 KiB sent", queue, len(m.Body))
		}
		if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSDKLoadManyClients runs 100 SDK clients at once, each on its own
// connection and queue, each sending and then receiving and completing.
func TestSDKLoadManyClients(t *testing.T) {
	const clients, perClient = 100, 3
	e := newSDKEnv(t, nil)
	for i := range clients {
		e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: fmt.Sprintf("load-%03d", i)})
	}
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		c := newSDKClient(t, e.testServer)
		queue := fmt.Sprintf("load-%03d", i)
		wg.Go(func() { errs <- clientRoundTrip(t, c, queue, perClient) })
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed++; failed <= 3 {
				t.Error(err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d clients failed", failed, clients)
	}
	for i := range clients {
		if c, _ := e.Broker.Counts(fmt.Sprintf("load-%03d", i)); c.Total != 0 {
			t.Errorf("load-%03d holds %d messages after its client completed all", i, c.Total)
		}
	}
}

// clientRoundTrip sends n messages to queue with c, receives and
// completes them, and checks each came back exactly once.
func clientRoundTrip(t *testing.T, c *azservicebus.Client, queue string, n int) error {
	// A deadline for a hang, not a speed limit: a hundred clients under
	// -race on two busy cores took more than sdkCtx's 20 s.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	snd, err := c.NewSender(queue, nil)
	if err != nil {
		return err
	}
	defer snd.Close(ctx)
	for j := range n {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "%s/%d", queue, j)}, nil); err != nil {
			return fmt.Errorf("%s: SendMessage: %w", queue, err)
		}
	}
	rcv, err := c.NewReceiverForQueue(queue, nil)
	if err != nil {
		return err
	}
	defer rcv.Close(ctx)
	// Each message exactly once. Order is not asserted: the SDK releases
	// messages that arrive after ReceiveMessages returned, and a released
	// message may come back after a later one (a non-session queue makes
	// no FIFO promise across releases); FIFO is checked with sessions.
	seen := make(map[string]bool, n)
	for len(seen) < n {
		msgs, err := rcv.ReceiveMessages(ctx, n-len(seen), nil)
		if err != nil {
			return fmt.Errorf("%s: ReceiveMessages: %w", queue, err)
		}
		for _, m := range msgs {
			body := string(m.Body)
			if !strings.HasPrefix(body, queue+"/") || seen[body] {
				return fmt.Errorf("%s: received %q twice or from another queue", queue, body)
			}
			seen[body] = true
			if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
				return fmt.Errorf("%s: CompleteMessage: %w", queue, err)
			}
		}
	}
	return nil
}
