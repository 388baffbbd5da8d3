// Package clusterrpc carries a routed broker's calls (core.Router) to the
// node that leads an entity's data group: a node's fronts serve every
// entity of the cluster, and what lives in a group led elsewhere is asked
// of its leader over one connection per pair of nodes, opened on the peer
// port (mutual TLS, storage/raftstore) and multiplexed.
//
// # Protocol
//
// Both directions carry frames: a 4-byte big-endian length, then the
// payload. A request is (call id, operation, group, arguments); the
// answer to it is (call id, status, result or error). Calls are answered
// in any order, each as it completes; a blocking call (receive, accept a
// session) may be cancelled by a cancel frame naming its id; the answer
// to a peek-lock receive is acknowledged by an ack frame naming its id as
// soon as it is read, and the messages of those not acknowledged when the
// connection ends are released (the caller never had them). The
// arguments and results are encoded here (codec.go): messages and
// property values with core's wire encoding, which keeps every value's
// type, the rest field by field. Sends of one link stay in order: the
// server plans each asynchronous send on its reading goroutine, in the
// order the requests came (core.Broker.SendAsync assigns sequence
// numbers before it returns), and answers once it is durable. A transfer
// call carries messages from one group's outbox to another group's
// broker (core.Broker.ApplyTransfers), each with its transfer id, and
// answers how many were applied and why the next one was not. A session
// lock accepted through the connection is watched by a call that the
// server answers once the lock ends (expiry, another receiver, a close,
// its broker stopping): the client closes the lock's Ended channel then,
// or when the call fails, and the front detaches the holder's link with
// session-lock-lost at once, as for a lock of its own process.
//
// # Fencing
//
// The server answers a call on a group only while it leads that group
// with a valid lease: every answer is checked against the group's
// Session just before it is written, and one that may no longer be
// written goes out as a retryable error instead (com.microsoft:server-
// busy at the client). So a deposed leader hands out no delivery and no
// acknowledgement, as the single-group cluster's fenced client
// connections guarantee. A connection that breaks fails the calls under
// way: those that may have changed something with core.CodeOutcomeUnknown
// (the client may retry), the others with core.CodeServerBusy.
package clusterrpc
