package raftstore

import "go.etcd.io/raft/v3"

// A pre-vote asked again soon (storage/raftstore/README.md, "Failover
// times").
//
// With CheckQuorum, a follower ignores a pre-vote while its lease on the
// leader runs: until ElectionTicks of its own ticks have passed since it
// last heard from it. When a leader freezes, the first follower whose
// (randomized) election timer fires pre-votes; the other follower, which
// heard the leader a moment later or whose ticks ran a little late under
// load, may still be in its lease for a tick or three and ignores it. etcd
// raft then leaves the pre-candidate waiting out its whole randomized
// timeout again (10 to 20 ticks) before it asks anew: a frozen node that
// led every group took 2.3 to 3.4 s to be replaced in the cluster soak,
// against about 1.2 s when the first pre-vote wins. So a pre-candidate
// asks again every preVoteRetryTicks ticks, at most preVoteRetries times
// in a row. A pre-vote changes no term and no vote, so asking again
// disturbs no leader; the bound keeps a node cut off from its peers from
// asking (and logging) more than raft itself would for long.
const (
	preVoteRetryTicks = 3
	preVoteRetries    = 3
)

// preVoteRetry is the loop's count of a pre-candidacy's ticks and retries.
type preVoteRetry struct {
	ticks, retries int
}

// tick advances rn's clock by one tick, and has it pre-vote again if it
// has been a pre-candidate for preVoteRetryTicks ticks since it last did,
// and has not yet asked again preVoteRetries times.
func (p *preVoteRetry) tick(rn *raft.RawNode) {
	rn.Tick()
	if rn.BasicStatus().RaftState != raft.StatePreCandidate {
		*p = preVoteRetry{}
		return
	}
	if p.ticks++; p.ticks < preVoteRetryTicks || p.retries >= preVoteRetries {
		return
	}
	p.ticks = 0
	p.retries++
	_ = rn.Campaign()
}
