package clustersoak

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/cmd/omnibus/omnibustest"
)

// The chain end to end, with the SDK the soak uses against a broker
// behind the soak's balancer: a message received on a connection the
// balancer then resets cannot be completed (the SDK retries the dead link
// and never reaches a broker, nor falls back to $management), and the
// SDK's log, read through listenSDK, marks that link; a message received
// on a live connection completes and its link stays unmarked.
func TestSDKSettleOnDeadConnectionSeenThroughTheLog(t *testing.T) {
	b := omnibustest.Start(t, omnibustest.Queue("q"))
	_, lost, stop := listenSDK(nil)
	defer stop()
	addr := regexp.MustCompile(`sb://([^;/]+)`).FindStringSubmatch(b.ConnectionString)[1]
	lb, err := newBalancer([]string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	viaLB := strings.Replace(b.ConnectionString, addr, lb.addr(), 1)
	opts := &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond}}
	cl, err := azservicebus.NewClientFromConnectionString(viaLB, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	snd, err := cl.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rcv, err := cl.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	receive := func() *azservicebus.ReceivedMessage {
		t.Helper()
		msgs, err := rcv.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v %v", msgs, err)
		}
		return msgs[0]
	}

	live := receive()
	if err := rcv.CompleteMessage(ctx, live, nil); err != nil {
		t.Fatalf("complete on a live connection: %v", err)
	}
	if lost.lost(linkNameOf(live)) {
		t.Errorf("link %s, whose connection lived, is marked as lost", linkNameOf(live))
	}

	dead := receive()
	lb.setUp(0, false) // the balancer resets the connection, as at a failover
	lb.setUp(0, true)  // and takes new ones: the SDK can reconnect
	// The SDK spends far longer than this on it (45 s with two retries
	// of 50 ms, in a trial); its first retry is logged at once.
	deadCtx, deadCancel := context.WithTimeout(ctx, 3*time.Second)
	defer deadCancel()
	err = rcv.CompleteMessage(deadCtx, dead, nil)
	var ae *amqp.Error
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("complete on a connection reset under it: %v, want a failure that no broker answered", err)
	}
	t.Logf("the SDK's completion on the dead connection: %v", err)
	if !lost.lost(linkNameOf(dead)) {
		t.Errorf("link %s, whose connection was reset, is not marked as lost", linkNameOf(dead))
	}
}
