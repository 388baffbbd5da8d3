// Package clustersoak is the failover soak of a replicated omnibus
// (issue 19), run as `omnibus-tools cluster-soak` (make cluster-test): three
// real omnibus processes form a cluster; the official Go SDK sends with
// many in flight and receives in peek-lock through a TCP load balancer in
// front of all three (the way one connection string reaches a cluster);
// the soak then deposes the leader again and again, by SIGKILL, by
// cutting it off the network or by freezing it (SIGSTOP), in turn
// (faults.go), restarts, heals or wakes it, and finally drains the queue
// and accounts for every message with a [bench.Ledger]. With data groups
// (--groups) the victims are the meta leader and the other nodes in turn,
// every fault kind hitting both, and half the load is on a partitioned
// queue spread over the groups, sent with partition keys whose order the
// soak checks (pkeys.go).
//
// Cutting a node off uses network namespaces: each node runs in its own
// (`ip netns`), joined to the others by veth pairs on a bridge, and the
// soak takes the node's link down, so the node goes on running without
// hearing anyone: it must fence itself. Where namespaces cannot be made
// (not root, no iproute2), the nodes run on loopback with kills and
// freezes only, and the run says so. A frozen node is silence, then a
// late wake-up that must not write anything to a client.
//
// The load balancer plays a real one's health check: the soak marks a
// node it kills or cuts off down, and the balancer resets the client
// connections it had to it (otherwise a connection to a node behind a
// dead link would hang until the SDK's own timeout).
//
// Clients never retry an operation themselves (MaxRetries < 0): every
// send the broker did not acknowledge is counted failed (it may or may
// not be stored), every completion without an answer unanswered (it may
// or may not be applied), and so is one refused as lock lost while a
// failover is under way (a cluster with data groups reports a completion
// whose outcome a leader change left unknown that way: core's
// routedSettleErr); a failed client is replaced by a new one.
//
// Every delivery and completion outcome, and each failover, is written to
// deliveries.log in the run's directory, with the broker's sequence
// number and lock token: a message counted delivered again can be read
// back (the same broker sequence number twice: one stored message handed
// out twice). After a drain that did not finish, it also lists what the
// queue still holds (peeked, with delivery counts).
//
// The accounting must show, for the run to pass: no acknowledged message
// lost, no message whose completion was confirmed delivered again, no
// message received that was never sent, no redelivery that nothing
// explains (a lost lock, an unanswered completion), and no message
// received and then gone without a completion, beyond the completions
// under way at the failovers (each of those may have been applied with
// its answer lost: one answered "lock lost" counts so when a failover
// was under way at its start or its end, or began meanwhile). Failover
// time is measured per failover, from the moment the fault took effect
// (the killed process reaped, the link down, the stopped process seen
// stopped) to the first send the new leader acknowledged: the first acknowledgement at or after the moment it says
// it began serving, so that none the deposed leader gave counts
// (failtime.go). Kills, cut-offs and freezes are reported apart (with
// data groups: of the meta leader and of another node), and the summary
// counts the failovers within 3 s (issue 29's bound; --max-failover
// makes one over a bound fail the run).
package clustersoak
