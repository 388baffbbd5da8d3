package raftstore

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// proposal is one Apply call's batch, encoded, waiting to be committed.
type proposal struct {
	seq  uint64
	enc  []byte
	done chan error // receives the outcome once (buffered)
}

// enqueue queues p for the loop, waiting while MaxPendingBytes are
// already queued. It fails if s ends first.
func (n *Node) enqueue(s *Session, p *proposal) error {
	n.mu.Lock()
	for {
		if err := s.Err(); err != nil {
			n.mu.Unlock()
			return err
		}
		if n.draining {
			n.mu.Unlock()
			return fmt.Errorf("%w (the write was not applied)", errTransferring)
		}
		if n.queueBytes == 0 || n.queueBytes+len(p.enc) <= n.cfg.MaxPendingBytes {
			break
		}
		space := n.space
		n.mu.Unlock()
		select {
		case <-space:
		case <-s.done:
		}
		n.mu.Lock()
	}
	p.seq = n.nextSeq
	n.nextSeq++
	n.queue = append(n.queue, p)
	n.queueBytes += len(p.enc)
	n.mu.Unlock()
	select {
	case n.propc <- struct{}{}:
	default:
	}
	return nil
}

// proposeUnlessAppending (on the loop) proposes what is queued, unless
// the leader's appender is still writing entries proposed earlier: then
// the batches wait, and go as one entry when that write ends (stepLocal).
// A loaded leader so proposes one entry per log write, not one per turn
// of its loop, each of which every member would write, send, acknowledge
// and apply apart; an idle one proposes at once, as nothing is being
// written. What has waited an election timeout is proposed anyway
// (tickProposals), so a write whose answer never came holds nothing back
// for good.
func (n *Node) proposeUnlessAppending() {
	if l := &n.loop; l.leadAppending > l.leadAppended {
		return
	}
	n.proposeQueued()
}

// tickProposals (on the loop, each tick) proposes what is queued once the
// leader's append has been under way for an election timeout.
func (n *Node) tickProposals() {
	l := &n.loop
	if l.leadAppending <= l.leadAppended {
		l.appendWaitTicks = 0
		return
	}
	if l.appendWaitTicks++; l.appendWaitTicks >= n.cfg.ElectionTicks {
		l.appendWaitTicks = 0
		n.proposeQueued()
	}
}

// proposeQueued (on the loop) proposes every queued batch: as few entries
// as MaxEntryBytes allows, each naming the sequence numbers it carries.
func (n *Node) proposeQueued() {
	for {
		n.mu.Lock()
		if len(n.queue) == 0 || n.sess == nil {
			n.mu.Unlock()
			return
		}
		take, size := 0, 0
		for take < len(n.queue) && (take == 0 || size+len(n.queue[take].enc) <= n.cfg.MaxEntryBytes) {
			size += len(n.queue[take].enc)
			take++
		}
		batch := make([]*proposal, take)
		copy(batch, n.queue)
		n.queue = append(n.queue[:0], n.queue[take:]...)
		n.queueBytes -= size
		for _, p := range batch {
			n.waiting[p.seq] = p
		}
		close(n.space) // room in the queue
		n.space = make(chan struct{})
		n.mu.Unlock()

		data := appendHeader(make([]byte, 0, 32+size), entryHeader{
			node: n.id, nonce: n.nonce, first: batch[0].seq, count: uint64(len(batch))})
		for _, p := range batch {
			data = append(data, p.enc...)
		}
		if err := n.loop.rn.Propose(data); err != nil {
			// Not in the log: cleanly refused.
			n.log.Warn("proposal dropped by raft", zap.Error(err), zap.Int("batches", len(batch)))
			n.mu.Lock()
			for _, p := range batch {
				if _, ok := n.waiting[p.seq]; ok {
					delete(n.waiting, p.seq)
					p.done <- fmt.Errorf("%w: raftstore: not proposed: %v", storage.ErrUnavailable, err)
				}
			}
			n.mu.Unlock()
		}
	}
}

// answer wakes the Apply calls whose batches the applied entries carry.
func (n *Node) answer(hs []entryHeader) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range hs {
		for seq := h.first; seq < h.first+h.count; seq++ {
			if p, ok := n.waiting[seq]; ok {
				delete(n.waiting, seq)
				p.done <- nil
			}
		}
	}
}

// failQueueLocked fails every batch not yet proposed: none was applied.
func (n *Node) failQueueLocked(why error) {
	if len(n.queue) == 0 {
		return
	}
	err := fmt.Errorf("%w (the write was not applied)", why)
	for _, p := range n.queue {
		p.done <- err
	}
	clear(n.queue)
	n.queue = n.queue[:0]
	n.queueBytes = 0
}

func zapErr(err error) zap.Field { return zap.Error(err) }
