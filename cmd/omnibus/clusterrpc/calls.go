package clusterrpc

import "sync/atomic"

// CallCounts counts the calls clients made, by operation: what a routed
// broker asks of other nodes, counted whatever the load (divided by the
// messages delivered, the calls each message cost). One CallCounts may be
// shared by several clients ([Client.Counts]).
type CallCounts struct {
	n [opLast]atomic.Int64
}

// Snapshot returns the counts by operation name, leaving out those at 0.
func (cc *CallCounts) Snapshot() map[string]int64 {
	out := map[string]int64{}
	for op := range cc.n {
		if v := cc.n[op].Load(); v > 0 {
			out[opName(byte(op))] = v
		}
	}
	return out
}

// add counts a call of op.
func (cc *CallCounts) add(op byte) {
	if cc != nil && int(op) < len(cc.n) {
		cc.n[op].Add(1)
	}
}

// opNames are the calls' names in CallCounts.Snapshot.
var opNames = map[byte]string{
	opSend: "send", opSendAsync: "send-async", opReceive: "receive", opSettle: "settle",
	opCompleteMany: "complete-many", opRenewLock: "renew-lock", opReceiveDeferred: "receive-deferred",
	opPeek: "peek", opCancelScheduled: "cancel-scheduled", opDeleteMessages: "delete-messages",
	opAcceptSession: "accept-session", opRenewSessionLock: "renew-session-lock", opCloseSession: "close-session",
	opGetSessionState: "get-session-state", opSetSessionState: "set-session-state", opListSessions: "list-sessions",
	opSessions: "sessions", opCreateEntity: "create-entity", opUpdateEntity: "update-entity",
	opDeleteEntity: "delete-entity", opGetEntity: "get-entity", opListEntities: "list-entities",
	opAddRule: "add-rule", opRemoveRule: "remove-rule", opListRules: "list-rules", opCounts: "counts",
	opEntityStats: "entity-stats", opTxnBegin: "txn-begin", opTxnSend: "txn-send", opTxnSettle: "txn-settle",
	opTxnRenewLock: "txn-renew-lock", opTxnCommit: "txn-commit", opTxnRollback: "txn-rollback",
	opPlace: "place", opMeta: "meta", opTransfer: "transfer", opSessionEnded: "session-ended",
}

// opName is op's name ("other" for one not named).
func opName(op byte) string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return "other"
}
