package clusterrpc

import (
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestTransfersCrossTheWire: transfers handed to a group's broker on
// another node are applied in order and at most once; the answer says
// how many were applied and, with its code intact, why the next was not.
func TestTransfersCrossTheWire(t *testing.T) {
	r := newRig(t)
	r.remote.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "far"})
	be := NewBackend(r.client, 1, r.routed)
	msg := func(body string) *core.Message {
		m := coretest.Text(body)
		m.ApplicationProperties = map[string]any{"n": int64(7)}
		return m
	}
	ts := []*core.Transfer{
		{ID: core.NewUUID(), Target: "far", Hops: 1, Message: msg("a")},
		{ID: core.NewUUID(), Target: "far", Hops: 1, Message: msg("b")},
		{ID: core.NewUUID(), Target: "gone", Hops: 1, Message: msg("c")},
	}
	n, err := be.ApplyTransfers(t.Context(), ts)
	if n != 2 || core.CodeOf(err) != core.CodeNotFound || core.TransferRetryable(err) {
		t.Fatalf("apply: %d, %v; want 2 and not found", n, err)
	}
	if n, err := be.ApplyTransfers(t.Context(), ts[:2]); n != 2 || err != nil {
		t.Fatalf("apply the two again: %d, %v", n, err)
	}
	got := r.remote.MustReceive(t, "far", core.ReceiveAndDelete, 10)
	if len(got) != 2 || string(got[0].Body) != "a" || string(got[1].Body) != "b" || got[1].ApplicationProperties["n"] != int64(7) {
		t.Fatalf("far holds %v, want a then b, once each, with their properties", got)
	}
}
