package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestHeaderSizeCap: a message's properties (application properties,
// annotations and system properties together) may take core.MaxHeaderSize
// bytes; one byte more and the send is refused as too large, alone or in
// a batch, and none of the batch is stored, although the entity would
// take far larger messages.
func TestHeaderSizeCap(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", MaxMessageSizeInKilobytes: 1024})
	// Subject "s" and key "k" take 2 bytes; the annotation fills the rest.
	at := func(n int) *core.Message {
		return &core.Message{Subject: "s", Body: make([]byte, 100<<10),
			ApplicationProperties: map[string]any{"k": strings.Repeat("p", n/2-2)},
			Annotations:           map[string]any{"a": strings.Repeat("x", n-n/2-1)}}
	}
	if got := at(core.MaxHeaderSize).HeaderSize(); got != core.MaxHeaderSize {
		t.Fatalf("HeaderSize = %d, want %d (the test's arithmetic)", got, core.MaxHeaderSize)
	}
	env.MustSend(t, "q", at(core.MaxHeaderSize))
	_, err := env.Broker.Send(t.Context(), "q", at(10), at(core.MaxHeaderSize+1))
	if !errors.Is(err, core.ErrMessageTooLarge) || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("send with properties one byte over: %v, want ErrMessageTooLarge naming 65536", err)
	}
	if c := env.MustCounts(t, "q"); c.Active != 1 {
		t.Errorf("active = %d, want only the message at the cap", c.Active)
	}
}
