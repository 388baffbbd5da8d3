package core_test

import (
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/core"
)

func TestWireMessageRoundTrip(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	m := &core.Message{
		MessageID: core.NewUUID(), CorrelationID: "c", SessionID: "s", ReplyToSessionID: "rs", To: "to", ReplyTo: "rt",
		Subject: "subj", ContentType: "ct", ContentEncoding: "ce", PartitionKey: "s", ViaPartitionKey: "v",
		TimeToLive: time.Minute, ScheduledEnqueueTime: at, CreationTime: at, UserID: []byte{1}, Priority: 4, Durable: true,
		ApplicationProperties: map[string]any{"i": int32(-3), "t": at, "b": []byte{9}, "n": nil, "u": core.NewUUID()},
		Annotations:           map[string]any{"x-other": core.Symbol("sym")}, BodyType: core.BodyAMQP, Body: []byte("body"),
		SequenceNumber: 3<<48 | 7, EnqueuedSequenceNumber: 3<<48 | 7, EnqueuedTime: at, ExpiresAt: at.Add(time.Hour),
		DeliveryCount: 2, State: core.StateDeferred, DeadLetterSource: "q", LockToken: core.NewUUID(), LockedUntil: at.Add(time.Second),
	}
	b, err := core.AppendMessage([]byte("prefix"), m)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, "rest"...)
	got, rest, err := core.ReadMessage(b[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "rest" {
		t.Errorf("left %q after the message", rest)
	}
	if diff := gocmp.Diff(m, got); diff != "" {
		t.Errorf("round trip (-sent +got):\n%s", diff)
	}
	for i := range len(b) - len("prefix") - len("rest") {
		if _, _, err := core.ReadMessage(b[len("prefix") : len("prefix")+i]); err == nil {
			t.Fatalf("a message cut to %d bytes decoded", i)
		}
	}
}
