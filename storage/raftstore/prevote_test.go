package raftstore

import (
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestPreCandidateAsksAgainSoon: a follower of three whose election timer
// fired pre-votes, hears nothing back (the other follower ignored it, its
// lease still running; the leader is frozen), and pre-votes again
// preVoteRetryTicks ticks later, not after a whole new election timeout
// (ElectionTick 10 here: etcd raft alone asks again after 10 to 20).
// After preVoteRetries such retries it leaves the asking to raft's timer.
func TestPreCandidateAsksAgainSoon(t *testing.T) {
	st := raft.NewMemoryStorage()
	if err := st.ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{
		Index: 1, Term: 1, ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: st,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, CheckQuorum: true, PreVote: true})
	if err != nil {
		t.Fatal(err)
	}
	var p preVoteRetry
	// preVotesAfter ticks n times (through p when retry is set, raft's
	// own Tick otherwise) and returns at which ticks (1-based) pre-votes
	// went out.
	preVotesAfter := func(n int, retry bool) []int {
		var at []int
		for i := 1; i <= n; i++ {
			if retry {
				p.tick(rn)
			} else {
				rn.Tick()
			}
			if !rn.HasReady() {
				continue
			}
			rd := rn.Ready()
			for _, m := range rd.Messages {
				if m.Type == pb.MsgPreVote && m.To == 2 {
					at = append(at, i)
				}
			}
			if len(rd.Entries) > 0 {
				if err := st.Append(rd.Entries); err != nil {
					t.Fatal(err)
				}
			}
			rn.Advance(rd)
		}
		return at
	}
	for len(preVotesAfter(1, false)) == 0 {
	}
	if rn.BasicStatus().RaftState != raft.StatePreCandidate {
		t.Fatalf("state %v after the election timer's pre-vote", rn.BasicStatus().RaftState)
	}
	p.ticks = 1 // the tick that made it a pre-candidate, as in the loop
	again := preVotesAfter(preVoteRetryTicks*preVoteRetries, true)
	if len(again) != preVoteRetries || again[0] > preVoteRetryTicks {
		t.Fatalf("pre-votes again at ticks %v after the first, want %d, every %d ticks", again, preVoteRetries, preVoteRetryTicks)
	}
	// Then raft's own timer alone: at most one more in ElectionTick ticks.
	if later := preVotesAfter(10, true); len(later) > 1 {
		t.Fatalf("pre-votes at ticks %v after the retries, want raft's timer's only", later)
	}
}
