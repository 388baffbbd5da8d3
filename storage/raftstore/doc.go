// Package raftstore is a [storage.Store] replicated by a Raft group
// (go.etcd.io/raft/v3): the broker's namespace on three (or more) nodes,
// so that a lost machine loses no acknowledged message.
//
// A [Node] is one member. It drives etcd raft's RawNode from one loop,
// keeps Raft's log and HardState in append-only segment files of its own
// (one write and one fdatasync per group of appends), and applies
// committed entries to a Pebble database, the state the broker reads. While a node leads the group and holds its lease it hands
// out a [Session]: the storage.Store the leader's core runs on. Apply on a
// Session proposes the batch and returns once a quorum has it on disk and
// the local state database has applied it; concurrent Apply calls are
// group-committed into one Raft entry and one log fsync.
//
// A Session ends, and every call on it fails with storage.ErrUnavailable,
// as soon as the node may no longer be the only leader: its lease lapsed,
// raft stepped down, or the node closed. The lease is measured in the
// transport and ends before any other node can be elected, so a deposed
// leader never acknowledges a write a majority has not stored and, with
// [Session.Valid] checked before each write to a client, never serves a
// read after another leader may have written.
//
// Replicas that fall behind the log receive a Pebble checkpoint of the
// state database (pebblestore.Store.Checkpoint) over the peer transport:
// one port served by net/http, whose raft streams are HTTP/1.1 upgrades to
// length-prefixed frames over TCP.
//
// DESIGN.md in this directory describes the write path, failover, fencing,
// snapshots, membership and the multi-group Step 2.
package raftstore
