package clustersoak

// The faults a failover applies. A kill is a SIGKILL, the process reaped
// and later started again on the same data; a cut-off takes the node's
// link down (network namespaces only), the process running on and
// hearing no one, later healed; a freeze is a SIGSTOP, the whole process
// (its disk writes with it) silent until a SIGCONT wakes it late, when it
// must not write anything to a client it no longer serves.
const (
	faultKill   = "killed"
	faultCut    = "cut off"
	faultFreeze = "froze (SIGSTOP)"
)

// faultKinds are the kinds a run applies in turn: only kills in --mode
// kill; otherwise kills, cut-offs (where namespaces exist) and freezes.
func faultKinds(mode string, netns bool) []string {
	switch {
	case mode == "kill":
		return []string{faultKill}
	case netns:
		return []string{faultKill, faultCut, faultFreeze}
	default:
		return []string{faultKill, faultFreeze}
	}
}

// schedule is failover k's (from 1) fault kind, and, with data groups,
// whether its victim is the meta group's leader (otherwise a node leading
// only data groups). Kinds go round; roles alternate so that within
// 2 × len(kinds) failovers every kind hits both roles: with an odd number
// of kinds the two cycles are coprime, with an even one the role cycle
// shifts by one after each round of kinds.
func schedule(kinds []string, k int) (kind string, meta bool) {
	j := k - 1
	kind = kinds[j%len(kinds)]
	if len(kinds)%2 == 1 {
		return kind, j%2 == 0
	}
	return kind, (j+j/len(kinds))%2 == 0
}

// fault applies kind to n, returning once it took effect (the process
// reaped, the link down, the process seen stopped).
func fault(kind string, n *node, nw *network) error {
	switch kind {
	case faultCut:
		n.cutOff = true
		return nw.cut(n.id, true)
	case faultFreeze:
		return n.freeze(true)
	default:
		return n.kill()
	}
}

// recoverFrom undoes fault: restarts, heals or wakes n.
func recoverFrom(kind string, n *node, nw *network) error {
	switch kind {
	case faultCut:
		n.cutOff = false
		return nw.cut(n.id, false)
	case faultFreeze:
		return n.freeze(false)
	default:
		return n.start()
	}
}
