package amqpserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
)

// TestSDKPropertiesOver64KB: a message whose properties take more than
// the 64 KB Service Bus allows for a message's header is refused with
// amqp:link:message-size-exceeded, although it is far below the queue's
// maximum message size; nothing of it is stored, and the sender goes on.
// A message whose properties take just under 64 KB is stored and comes
// back with them intact.
func TestSDKPropertiesOver64KB(t *testing.T) {
	e := newSDKEnv(t, nil) // queue q takes messages up to 1 MiB
	ctx := sdkCtx(t)
	snd := e.sender(t, "q")

	// Two properties of 33 KB: each below Service Bus's 32 KiB per
	// property would not matter, together over 64 KB.
	over := &azservicebus.Message{Body: []byte("over"), ApplicationProperties: map[string]any{
		"a": strings.Repeat("a", 33<<10), "b": strings.Repeat("b", 33<<10)}}
	if err := snd.SendMessage(ctx, over, nil); !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		t.Fatalf("send with 66 KiB of properties: %v, want ErrMessageTooLarge (the SDK's name for amqp:link:message-size-exceeded)", err)
	}
	// The condition and text themselves, as go-amqp reports them.
	raw := mustSender(t, e.session(t), "q")
	err := raw.Send(ctx, &amqp.Message{Data: [][]byte{[]byte("over")}, ApplicationProperties: over.ApplicationProperties}, nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondMessageSizeExceeded {
		t.Fatalf("go-amqp send with 66 KiB of properties: %v, want amqp:link:message-size-exceeded", err)
	}
	if !strings.Contains(ae.Description, "65536") {
		t.Errorf("description %q does not name the 65536-byte quota", ae.Description)
	}

	under := strings.Repeat("u", core.MaxHeaderSize-100)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("under"),
		ApplicationProperties: map[string]any{"u": under}}, nil); err != nil {
		t.Fatalf("send with properties just under 64 KiB: %v", err)
	}
	if c, _ := e.Broker.Counts("q"); c.Active != 1 {
		t.Errorf("active = %d, want only the message under the cap", c.Active)
	}
	m := receiveOne(t, e.receiver(t, "q", nil))
	if string(m.Body) != "under" || m.ApplicationProperties["u"] != under {
		t.Errorf("received %q with a property of %d bytes, want the message just under the cap",
			m.Body, len(m.ApplicationProperties["u"].(string)))
	}
}
