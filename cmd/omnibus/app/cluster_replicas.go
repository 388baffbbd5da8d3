package app

import (
	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// followGroups serves the data groups this node runs as their replicas
// move to it and away from it (storage/raftstore, replicas.go): for each
// group it opens, from the start on, a broker over each Session it gets
// (serveGroup) and the watch on its leader (watchLeader); both end when
// the group is dropped here (its member closed).
func (r *routed) followGroups() {
	started := map[*raftstore.Node]bool{}
	for {
		changed := r.meta.GroupsChanged()
		for _, gn := range r.meta.Groups() {
			if gn.Group() != 0 && !started[gn] {
				started[gn] = true
				go r.serveGroup(gn)
				go r.watchLeader(gn)
			}
		}
		for gn := range started {
			select {
			case <-gn.Done():
				delete(started, gn)
			default:
			}
		}
		select {
		case <-changed:
		case <-r.cl.ctx.Done():
			return
		}
	}
}
