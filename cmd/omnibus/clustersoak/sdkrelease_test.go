package clustersoak

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/cmd/omnibus/omnibustest"
)

// The SDK's releaser reports, per link, what it gave back (its log lines
// as azservicebus v1.11 writes them), and a releaser stopped by a link
// failure one more it may have taken; a session hold gets each link's
// releases once, those made before its first delivery came included, and
// none of another link's.
func TestSDKReleasesPerHold(t *testing.T) {
	r := &sdkReleases{byLink: map[string]int64{}}
	for _, line := range []string{
		"[c:1, l:1, r:name:Buib4g] Message releaser pausing. Released 1 messages",
		"[c:1, l:1, r:name:Buib4g] Issuing 19 credits, have 1",
		"[c:2, l:3, r:name:other1] Message releaser pausing. Released 7 messages",
		"[c:1, l:1, r:name:Buib4g] Message releaser stopping because of link failure. Released 2 messages. Will start again after next receive: amqp: link closed",
	} {
		r.note(line)
	}
	var h holdReleases
	if n := h.account(r); n != 0 {
		t.Errorf("before any delivery: %d released, want 0 (no link known)", n)
	}
	if n := h.account(r, "Buib4gWhateverFollowsInTheFullName"); n != 4 {
		t.Errorf("first delivery on the link: %d released, want 4 (1 + 2, and 1 the failed releaser may have held)", n)
	}
	if n := h.account(r, "Buib4gWhateverFollowsInTheFullName"); n != 0 {
		t.Errorf("nothing new: %d released, want 0", n)
	}
	r.note("[c:1, l:1, r:name:Buib4g] Message releaser pausing. Released 4 messages")
	if n := h.account(r); n != 4 {
		t.Errorf("released at close: %d, want 4", n)
	}
	if n := (*sdkReleases)(nil).released("Buib4g"); n != 0 {
		t.Errorf("no listener: %d released, want 0", n)
	}
}

// linkNameOf reads a field the SDK does not export: an SDK update that
// moves it must fail here, not leave every swap unexplained.
func TestLinkNameOf(t *testing.T) {
	f, ok := reflect.TypeFor[azservicebus.ReceivedMessage]().FieldByName("linkName")
	if !ok || f.Type.Kind() != reflect.String {
		t.Fatalf("azservicebus.ReceivedMessage has no string field linkName (%v): sdkrelease.go must find the link name elsewhere", f.Type)
	}
	if got := linkNameOf(&azservicebus.ReceivedMessage{}); got != "" {
		t.Errorf("linkNameOf(empty message) = %q, want \"\"", got)
	}
}

// The chain end to end, with the SDK the soak uses against a broker: a
// message that arrives between two ReceiveMessages calls of a session
// receiver is released by the SDK unseen, and its log, read through
// listenSDK and the link name of the hold's deliveries, puts it
// down to that hold. A message sent just after a receive returns usually
// reaches the releaser; the loop sends until one has (a few tries).
func TestSDKReleaseSeenThroughTheLog(t *testing.T) {
	b := omnibustest.Start(t, omnibustest.SessionQueue("s"))
	rel, _, stop := listenSDK(nil)
	defer stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cl, err := azservicebus.NewClientFromConnectionString(b.ConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	snd, err := cl.NewSender("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(i int) {
		t.Helper()
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(i)), SessionID: to.Ptr("a")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	sr, err := cl.AcceptSessionForQueue(ctx, "s", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	var hold holdReleases
	got := 0
	for i := 1; i <= 50; i++ {
		msgs, err := sr.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := sr.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		got += len(msgs)
		names := linkNames(msgs)
		if len(msgs) > 0 && len(names) != 1 {
			t.Fatalf("deliveries of one link name %d links: %q", len(names), names)
		}
		if n := hold.account(rel, names...); n > 0 {
			t.Logf("try %d: the SDK released %d unseen on link %q (%d of %d messages sent received)", i, n, names, got, i)
			return
		}
		send(i) // arrives while the releaser runs
	}
	t.Fatalf("no release of the SDK's put down to the hold in 50 tries (%d messages received; releases by link %v)", got, rel.byLink)
}
