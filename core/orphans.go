package core

import (
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Orphan bodies.
//
// A shared body whose last copy went while another write releasing a copy
// was in flight is deleted apart, once the last of them ends (bodyrefs.go),
// and so is a body whose subscription was deleted between a send's commit
// and its publication. Such a deletion needs no fsync, and when the store
// refuses it the body is kept on a list of pending deletions, bounded by
// maxPendingOrphans, retried after the next write that commits. Broker.Check
// counts a pending body as known, not as garbage. A body whose deletion is
// lost anyway (a crash, or beyond the bound) is garbage on disk, which
// Broker.Check reports; it is never a message.

// maxPendingOrphans bounds the body deletions kept for a retry.
const maxPendingOrphans = 1 << 16

// deleteOrphans deletes the bodies of batch (deletions only), keeping
// them for a retry if the store refuses.
func (b *Broker) deleteOrphans(batch *storage.Batch) {
	if len(batch.Ops) == 0 {
		return
	}
	if err := b.store.Apply(batch); err != nil {
		b.keepOrphans(batch.Ops, err)
	}
}

// keepOrphans puts refused body deletions on the pending list.
func (b *Broker) keepOrphans(ops []storage.Op, err error) {
	b.orphans.Lock()
	room := maxPendingOrphans - len(b.orphans.keys)
	for _, op := range ops[:min(len(ops), max(room, 0))] {
		b.orphans.keys = append(b.orphans.keys, op.Key)
	}
	b.orphans.n.Store(int32(len(b.orphans.keys)))
	b.orphans.Unlock()
	if room < len(ops) {
		b.warnStorage("too many shared message bodies wait for deletion; the rest stay on disk as garbage (Broker.Check lists them)",
			zap.Int("bodies", len(ops)-max(room, 0)), zap.Error(err))
		return
	}
	b.warnStorage("deleting shared message bodies no subscription needs any more failed; retrying after the next write",
		zap.Int("bodies", len(ops)), zap.Error(err))
}

// retryOrphans tries the pending body deletions again, after a write
// committed. It costs an atomic load when none are pending.
func (b *Broker) retryOrphans() {
	if b.orphans.n.Load() == 0 {
		return
	}
	b.orphans.Lock()
	keys := b.orphans.keys
	b.orphans.keys = nil
	b.orphans.n.Store(0)
	b.orphans.Unlock()
	var batch storage.Batch
	for _, k := range keys {
		batch.Delete(k)
	}
	b.deleteOrphans(&batch)
}

// pendingOrphans returns the body keys waiting for deletion (Check).
func (b *Broker) pendingOrphans() map[string]bool {
	b.orphans.Lock()
	defer b.orphans.Unlock()
	out := make(map[string]bool, len(b.orphans.keys))
	for _, k := range b.orphans.keys {
		out[string(k)] = true
	}
	return out
}
