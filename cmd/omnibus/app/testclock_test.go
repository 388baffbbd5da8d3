package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// TestTestClock: with --allow-test-clock, moving one namespace's clock
// forward makes its scheduled messages due, its locks lapse, its
// messages' time to live run out and its idle queues auto-delete, at
// once, through the Go SDK; another namespace's time does not move; a
// scheduled message can be delivered now; a move backwards is refused and
// changes nothing.
func TestTestClock(t *testing.T) {
	a := startNamespaces(t, true)
	for _, ns := range []string{"fast", "slow"} {
		if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/"+ns, ""); st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", ns, st, body)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, ns := range []string{"fast", "slow"} {
		ac := adminFor(t, a, DefaultKeyName+"@"+ns, DefaultKey)
		for _, q := range []struct {
			name  string
			props *admin.QueueProperties
		}{
			{"q", &admin.QueueProperties{LockDuration: to.Ptr("PT30S")}},
			{"short", &admin.QueueProperties{DefaultMessageTimeToLive: to.Ptr("PT10M"), DeadLetteringOnMessageExpiration: to.Ptr(true)}},
			{"idle", &admin.QueueProperties{AutoDeleteOnIdle: to.Ptr("PT5M")}},
		} {
			if _, err := ac.CreateQueue(ctx, q.name, &admin.CreateQueueOptions{Properties: q.props}); err != nil {
				t.Fatalf("%s: CreateQueue %s: %v", ns, q.name, err)
			}
		}
	}
	clients := map[string]*azservicebus.Client{}
	for _, ns := range []string{"fast", "slow"} {
		c := clientByHost(t, a, ns, DefaultKeyName, DefaultKey)
		clients[ns] = c
		s, err := c.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		nsNow := namespaceNow(t, a, ns)
		if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("in an hour")}}, nsNow.Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("locked")}, nil); err != nil {
			t.Fatal(err)
		}
		short, _ := c.NewSender("short", nil)
		if err := short.SendMessage(ctx, &azservicebus.Message{Body: []byte("short-lived")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	fast := clients["fast"]
	r, err := fast.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	locked, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(locked) != 1 || string(locked[0].Body) != "locked" {
		t.Fatalf("peek-lock: %v, %v", locked, err)
	}

	// A move backwards is refused and changes nothing.
	before := namespaceNow(t, a, "fast")
	if st, body := rootCall(t, a, http.MethodPost, "/$namespaces/fast/clock?advance=-1h", ""); st != http.StatusBadRequest || !strings.Contains(body, "only moves forward") {
		t.Errorf("moving the clock back: %d %s, want 400", st, body)
	}
	if now := namespaceNow(t, a, "fast"); now.Sub(before) > time.Minute {
		t.Errorf("a refused move changed the clock from %v to %v", before, now)
	}

	if st, body := rootCall(t, a, http.MethodPost, "/$namespaces/fast/clock?advance=1h1m", ""); st != http.StatusOK {
		t.Fatalf("advance: %d %s", st, body)
	}
	// The lock lapsed: completing fails, and the message is back with a
	// second delivery.
	var sbErr *azservicebus.Error
	if err := r.CompleteMessage(ctx, locked[0], nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Errorf("completing after the clock passed the lock: %v, want lock lost", err)
	}
	got := receiveN(t, ctx, fast, "q", 2)
	bodies := map[string]uint32{}
	for _, m := range got {
		bodies[string(m.Body)] = m.DeliveryCount
	}
	if _, ok := bodies["in an hour"]; !ok || bodies["locked"] != 2 {
		t.Errorf("after 1h1m fast holds %v, want the scheduled message and the unlocked one on its second delivery", bodies)
	}
	// Expired (a receiver finds it so, as on Service Bus, and it moves to
	// the dead-letter subqueue), and auto-deleted.
	if st, body := restReceive(t, a, "fast", "short"); st != http.StatusNoContent {
		t.Errorf("receiving a message with a 10-minute time to live an hour later: %d %q, want 204", st, body)
	}
	dr, err := fast.NewReceiverForQueue("short", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	if dl, err := dr.ReceiveMessages(ctx, 1, nil); err != nil || len(dl) != 1 || dl[0].DeadLetterReason == nil || *dl[0].DeadLetterReason != "TTLExpiredException" {
		t.Errorf("the expired message in the dead-letter subqueue: %v, %v", dl, err)
	}
	if q, err := adminFor(t, a, DefaultKeyName+"@fast", DefaultKey).GetQueue(ctx, "idle", nil); err != nil || q != nil {
		t.Errorf("a queue idle past its AutoDeleteOnIdle still exists: %v, %v", q, err)
	}

	// The other namespace's time did not move.
	slow := clients["slow"]
	if st, body := restReceive(t, a, "slow", "short"); st != http.StatusOK || body != "short-lived" {
		t.Errorf("slow's short-lived message: %d %q, want it", st, body)
	}
	if q, err := adminFor(t, a, DefaultKeyName+"@slow", DefaultKey).GetQueue(ctx, "idle", nil); err != nil || q == nil {
		t.Errorf("slow's idle queue was deleted: %v", err)
	}
	scheduled := peekAll(t, ctx, slow, "q")
	var seq int64 = -1
	for _, m := range scheduled {
		if string(m.Body) == "in an hour" && m.State == azservicebus.MessageStateScheduled {
			seq = *m.SequenceNumber
		}
	}
	if seq < 0 {
		t.Fatalf("slow's scheduled message is not scheduled any more: %v", scheduled)
	}
	// Deliver it now.
	path := "/$namespaces/slow/deliver?entity=q&sequence=" + strconv.FormatInt(seq, 10)
	if st, body := rootCall(t, a, http.MethodPost, path, ""); st != http.StatusOK || !strings.Contains(body, `"Delivered": 1`) {
		t.Fatalf("deliver now: %d %s", st, body)
	}
	sr, err := slow.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for !found {
		msgs, err := sr.ReceiveMessages(ctx, 2, nil)
		if err != nil {
			t.Fatalf("receiving the delivered message: %v", err)
		}
		for _, m := range msgs {
			found = found || string(m.Body) == "in an hour"
		}
	}
}

// TestTestClockNeedsTheFlag: without --allow-test-clock the clock calls
// are refused with 403 and say how to turn them on.
func TestTestClockNeedsTheFlag(t *testing.T) {
	a := startNamespaces(t, false)
	for _, path := range []string{"/$namespaces/" + a.Namespace + "/clock?advance=1h", "/$namespaces/" + a.Namespace + "/deliver?entity=q&sequence=1"} {
		if st, body := rootCall(t, a, http.MethodPost, path, ""); st != http.StatusForbidden || !strings.Contains(body, "--allow-test-clock") {
			t.Errorf("POST %s without the flag: %d %s, want 403 naming --allow-test-clock", path, st, body)
		}
	}
}

// restReceive receives and deletes the head of queue q of namespace ns
// over REST, without waiting: 200 and the body, or 204.
func restReceive(t *testing.T, a *App, ns, q string) (int, string) {
	t.Helper()
	return nsCall(t, a, http.MethodDelete, "/"+q+"/messages/head?timeout=0", DefaultKeyName+"@"+ns, DefaultKey, "")
}

// namespaceNow reads a namespace's time from the namespaces API.
func namespaceNow(t *testing.T, a *App, ns string) time.Time {
	t.Helper()
	st, body := rootCall(t, a, http.MethodGet, "/$namespaces/"+ns, "")
	var v struct{ Now time.Time }
	if st != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("GET /$namespaces/%s: %d %s", ns, st, body)
	}
	return v.Now
}

// receiveN peek-locks messages of queue q until it has n.
func receiveN(t *testing.T, ctx context.Context, c *azservicebus.Client, q string, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForQueue(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			t.Fatalf("receive from %s: %v (have %d of %d)", q, err, len(got), n)
		}
		got = append(got, msgs...)
	}
	return got
}

// peekAll peeks up to 100 messages of queue q.
func peekAll(t *testing.T, ctx context.Context, c *azservicebus.Client, q string) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForQueue(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	msgs, err := r.PeekMessages(ctx, 100, nil)
	if err != nil {
		t.Fatalf("peek %s: %v", q, err)
	}
	return msgs
}
