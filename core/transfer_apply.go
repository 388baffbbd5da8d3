package core

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/omnibusmq/omnibus/storage"
)

// ApplyTransfers enqueues transfers from another group's outbox
// (transfer.go), in order, each at most once: a transfer whose id this
// broker applied before (within the window it keeps ids for) is taken as
// applied and enqueued no more. The ids are recorded in the write that
// enqueues. It returns how many of ts, from the first, are applied now
// (durably) or were before; err, when not nil, is why the next one is
// not (nothing after it was tried). [TransferRetryable] tells whether
// that one may succeed later.
func (b *Broker) ApplyTransfers(ctx context.Context, ts []*Transfer) (int, error) {
	if b.routed() {
		return 0, errf(CodeInternal, "a routed broker holds no entity to apply transfers to")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p, n, err := b.planTransfers(ts)
	if err != nil && n > 0 {
		// Apply those before the one refused: plan them again alone.
		p.finish(true)
		var err2 error
		if p, _, err2 = b.planTransfers(ts[:n]); err2 != nil {
			p.finish(true)
			return 0, err2
		}
	} else if err != nil {
		p.finish(true)
		return 0, err
	}
	if cerr := p.commit(); cerr != nil {
		return 0, cerr
	}
	return n, err
}

// planTransfers plans ts into one send. It returns the plan and how many
// of ts it holds; err is why the next one could not be planned (the plan
// then holds part of it, and must be dropped).
func (b *Broker) planTransfers(ts []*Transfer) (*sendPlan, int, error) {
	p := &sendPlan{b: b, now: b.Now(), batch: storage.Batch{Sync: true}, owned: true}
	x := &b.xfer
	tc := &b.cfg.Transfers
	x.mu.Lock()
	x.evictLocked(p, int64(tc.DedupWindow), tc.DedupCount)
	x.mu.Unlock()
	for i, t := range ts {
		x.mu.Lock()
		at, seen := x.applied[t.ID]
		if !seen {
			x.applied[t.ID] = 0
		}
		x.mu.Unlock()
		if seen {
			if at == 0 {
				return p, i, errf(CodeServerBusy, "transfer %x is being applied by another call; retry", t.ID[:])
			}
			continue // applied before: a re-send whose answer was lost
		}
		p.applied = append(p.applied, t.ID)
		p.batch.Set(appliedKey(t.ID), u64(uint64(p.now)))
		e, err := b.sendTarget(t.Target)
		if err == nil {
			err = p.add(e, []*Message{t.Message}, nil, t.Hops)
		}
		if err != nil {
			if CodeOf(err) == CodeNotFound {
				return p, i, errf(CodeNotFound, "The messaging entity '%s' a transfer forwards to could not be found.", t.Target)
			}
			return p, i, errf(CodeOf(err), "transfer to '%s': %s", t.Target, errMsg(err))
		}
	}
	return p, len(ts), nil
}

// evictLocked forgets the applied ids older than window or beyond the
// count bound, deleting their records in p's write.
func (x *transfers) evictLocked(p *sendPlan, window int64, count int) {
	n := 0
	for n < len(x.order) && (len(x.order)-n > count || x.order[n].at < p.now-window) {
		id := x.order[n].id
		delete(x.applied, id)
		p.batch.Delete(appliedKey(id))
		n++
	}
	if n == 0 {
		return
	}
	x.order = x.order[n:]
	if cap(x.order) > 2*len(x.order)+1024 {
		x.order = slices.Clone(x.order) // let go of what was evicted
	}
}

// errMsg is err's message without its code's prefix.
func errMsg(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}

func appliedKey(id UUID) []byte {
	return append([]byte{tabApplied}, id[:]...)
}

func sortApplied(ids []appliedID) {
	slices.SortFunc(ids, func(a, b appliedID) int { return cmp.Compare(a.at, b.at) })
}
