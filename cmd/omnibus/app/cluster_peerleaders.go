package app

import (
	"sync"
	"time"
)

// Leaders of the data groups this node holds no replica of.
//
// A node routes a call on a data group it holds to the leader its own
// replica knows. Of a group it does not hold (in a cluster of more than
// three nodes each group is on three) it learns the leader from the other
// members' status (peerGroups: an HTTPS call on each). Asked for every
// call, as it was, that made every send, receive and settlement on such a
// group a status call on every member, most of them on a new TLS
// connection (the peer client keeps two per member): the five-node
// cluster of issue 29's measurement spent half of each node's CPU in TLS
// handshakes and carried a third of what one group did. The answers are
// now kept: a leader known is used while a newer answer is asked for,
// once peerLeaderTTL after the last, by one caller while the others go on
// with the old one; a group with no leader known waits for an answer
// under way, or asks again once peerLeaderRetry after the last. A leader
// that changed meanwhile refuses the calls with server busy ("this node
// does not lead the entity's group now; retry"), which the clients retry,
// for at most about peerLeaderTTL.

const (
	peerLeaderTTL   = 500 * time.Millisecond
	peerLeaderRetry = 100 * time.Millisecond
)

// peerLeaders is what the members last said of the leaders of the data
// groups this node does not hold.
type peerLeaders struct {
	mu      sync.Mutex        // guards the fields below
	leaders map[uint64]uint64 // group → leader
	asked   time.Time         // when leaders was filled
	asking  chan struct{}     // closed when the ask under way ends; nil: none
}

// peerLeader is the leader of data group g, which this node does not
// hold, as the members say (0: none known).
func (r *routed) peerLeader(g uint64) uint64 {
	p := &r.peers
	p.mu.Lock()
	l, age, asking := p.leaders[g], time.Since(p.asked), p.asking
	switch {
	case l != 0 && (age < peerLeaderTTL || asking != nil):
		p.mu.Unlock()
		return l
	case l == 0 && asking != nil:
		p.mu.Unlock()
		<-asking
		p.mu.Lock()
		l = p.leaders[g]
		p.mu.Unlock()
		return l
	case l == 0 && age < peerLeaderRetry:
		p.mu.Unlock()
		return 0
	}
	done := make(chan struct{})
	p.asking = done
	p.mu.Unlock()

	leaders := map[uint64]uint64{}
	for _, gs := range r.peerGroups() {
		leaders[gs.Group] = gs.Leader
	}
	p.mu.Lock()
	p.leaders, p.asked, p.asking = leaders, time.Now(), nil
	p.mu.Unlock()
	close(done)
	return leaders[g]
}
