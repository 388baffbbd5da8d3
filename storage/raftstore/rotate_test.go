package raftstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// meshTalks starts a transport for each node with its credentials and
// checks that every node's frames reach every other; it returns the
// transports, which the caller closes.
func meshTalks(t *testing.T, stage string, creds map[uint64]*peertls.Creds) map[uint64]*httpTransport {
	t.Helper()
	trs, hs := map[uint64]*httpTransport{}, map[uint64]*countingHandler{}
	for id, c := range creds {
		hs[id] = newCountingHandler(0)
		trs[id] = startTransportWith(t, id, hs[id], peerSecurity{creds: c, admin: testAdmin}, nil)
	}
	for from, tr := range trs {
		for to, peer := range trs {
			if from != to {
				tr.setPeer(0, to, peer.addr())
			}
		}
	}
	for from, tr := range trs {
		for to := range trs {
			if from == to {
				continue
			}
			got := hs[to].received.Load()
			sendUntil(t, tr, to, pb.Message{Type: pb.MsgHeartbeat, From: from, To: to, Term: 1},
				fmt.Sprintf("%s: node %d's frames to reach node %d", stage, from, to), func() bool { return hs[to].received.Load() > got })
		}
	}
	return trs
}

func closeAll(trs map[uint64]*httpTransport) {
	for _, tr := range trs {
		tr.close()
	}
}

// A CA rotation (rotate on one node, renew the others from it, finish on
// each) keeps every pair of members talking at every step, admits new
// nodes throughout, and ends with the old CA's certificates refused (a
// removed member's, say).
func TestCARotationKeepsEveryPairTalking(t *testing.T) {
	old, err := peertls.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	creds := map[uint64]*peertls.Creds{1: newTestCreds(t, old, 1), 2: newTestCreds(t, old, 2), 3: newTestCreds(t, old, 3)}
	removed := newTestCreds(t, old, 9)
	closeAll(meshTalks(t, "before", creds))

	// 1. Rotate on node 1.
	if creds[1], err = creds[1].Rotate(time.Now()); err != nil {
		t.Fatal(err)
	}
	trs := meshTalks(t, "node 1 rotated", creds)
	// A node joins meanwhile, with a token naming the new CA.
	admin := NewClient(creds[1], func() string { return testAdminKey })
	tok, err := admin.JoinToken(t.Context(), trs[1].addr(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if creds[4], err = Enroll(t.Context(), tok, 4); err != nil {
		t.Fatalf("joining during the rotation: %v", err)
	}
	// 2. Renew the others from node 1 (the key is needed).
	if _, err := NewClient(creds[2], nil).Renew(t.Context(), trs[1].addr(), 2); err == nil {
		t.Fatal("a renewal without the Manage key succeeded")
	}
	for _, id := range []uint64{2, 3} {
		renewed, err := NewClient(creds[id], func() string { return testAdminKey }).Renew(t.Context(), trs[1].addr(), id)
		if err != nil {
			t.Fatalf("renewing node %d: %v", id, err)
		}
		creds[id] = renewed
	}
	closeAll(trs)
	closeAll(meshTalks(t, "all renewed", creds))

	// 3. Finish, one node at a time.
	for _, id := range []uint64{1, 2, 3, 4} {
		if creds[id], err = creds[id].Finish(); err != nil {
			t.Fatalf("finishing on node %d: %v", id, err)
		}
		closeAll(meshTalks(t, fmt.Sprintf("node %d finished", id), creds))
	}
	if len(creds[1].Trusted) != 1 || creds[1].Trusted[0].Equal(old.Cert) {
		t.Fatalf("after the rotation node 1 trusts %d CAs, the old one among them", len(creds[1].Trusted))
	}

	// The old CA's certificates are refused now.
	t1 := startTestTransportWithCreds(t, 1, creds[1])
	if _, err := NewClient(removed, nil).Status(t.Context(), t1.addr()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a certificate of the old CA after the rotation: %v, want refused", err)
	}
}

func startTestTransportWithCreds(t *testing.T, id uint64, c *peertls.Creds) *httpTransport {
	return startTransportWith(t, id, newCountingHandler(0), peerSecurity{creds: c, admin: testAdmin}, nil)
}
