package core_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// Bodies on either side of the size from which a send's record is built
// by appending the body (largeBody, 32 KiB), sent together with small
// ones, come back whole with their properties, from memory and from the
// store after a restart; so do the state records written beside them
// (a long session id makes the state record outgrow the room behind a
// large body).
func TestLargeBodiesKeptWhole(t *testing.T) {
	forEachStore(t, func(t *testing.T, open coretest.Opener) {
		env := coretest.NewWith(t, open)
		env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute, MaxDeliveryCount: 5,
			RequiresSession: true, MaxSizeInMegabytes: 1024})
		sizes := []int{0, 1, 1024, 32<<10 - 1, 32 << 10, 64 << 10, 64<<10 + 7, 200 << 10}
		sid := strings.Repeat("s", 128)
		body := func(i, n int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, n) }
		var msgs []*core.Message
		for i, n := range sizes {
			msgs = append(msgs, &core.Message{
				MessageID: fmt.Sprintf("m%d", i), SessionID: sid, Subject: "s", BodyType: core.BodyBinary, Body: body(i, n),
				ApplicationProperties: map[string]any{"n": int64(n)},
			})
		}
		env.MustSend(t, "q", msgs...)
		check := func(when string) {
			t.Helper()
			got, err := env.Broker.Peek(t.Context(), "q", core.PeekOptions{From: 1, Max: len(sizes) + 1, SessionID: sid})
			if err != nil {
				t.Fatalf("%s: peek: %v", when, err)
			}
			if len(got) != len(sizes) {
				t.Fatalf("%s: peeked %d messages, want %d", when, len(got), len(sizes))
			}
			for i, m := range got {
				n := sizes[i]
				if m.MessageID != fmt.Sprintf("m%d", i) || m.SessionID != sid || m.Subject != "s" || m.ApplicationProperties["n"] != int64(n) {
					t.Errorf("%s: message %d: id %v session %d bytes subject %q props %v", when, i, m.MessageID, len(m.SessionID), m.Subject, m.ApplicationProperties)
				}
				if !bytes.Equal(m.Body, body(i, n)) {
					t.Errorf("%s: message %d: body of %d bytes differs from the %d sent", when, i, len(m.Body), n)
				}
			}
		}
		check("before restart")
		env.Restart(t)
		check("after restart")
	})
}
