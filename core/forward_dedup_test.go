package core_test

import (
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A queue that forwards still detects duplicates itself: the second
// message with the same id never reaches the target.
func TestForwardingQueueDetectsDuplicates(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "target"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "source", ForwardTo: "target", RequiresDuplicateDetection: true})
	first := &core.Message{MessageID: "same", Body: []byte("first")}
	again := &core.Message{MessageID: "same", Body: []byte("again")}
	other := &core.Message{MessageID: "other", Body: []byte("other")}
	seqs := env.MustSend(t, "source", first, again, other)
	if seqs[0] == 0 || seqs[1] != 0 || seqs[2] == 0 {
		t.Fatalf("sequence numbers %v, want the duplicate's to be 0", seqs)
	}
	env.MustSend(t, "source", &core.Message{MessageID: "same", Body: []byte("later")})
	got := coretest.Bodies(env.MustReceive(t, "target", core.ReceiveAndDelete, 10))
	if len(got) != 2 || got[0] != "first" || got[1] != "other" {
		t.Fatalf("target received %v, want [first other]", got)
	}
	env.Restart(t)
	env.MustSend(t, "source", &core.Message{MessageID: "same", Body: []byte("after restart")})
	if got := env.MustReceive(t, "target", core.ReceiveAndDelete, 10); len(got) != 0 {
		t.Fatalf("a duplicate sent after a restart reached the target: %v", coretest.Bodies(got))
	}
}
