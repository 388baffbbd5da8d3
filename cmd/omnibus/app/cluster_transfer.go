package app

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
)

// Transfers between data groups (core/transfer.go). A broker of a group
// writes a message forwarded to an entity of another group into its
// outbox, in the write that accepts or moves it; the pumps below, on the
// node serving the group's Session, hand the outbox to the target
// groups' brokers (here, or on the node leading them) and delete what
// was applied. A pump runs per target group, one round at a time, so
// transfers reach each group in the order they were written. A new
// leader of the group resumes the outbox where the old one left it: what
// the old one sent without hearing back is sent again, and the target,
// which keeps the ids it applied, drops it.

// A pump's round and its retries.
const (
	transferRoundCount = 256     // transfers per round, at most
	transferRoundBytes = 4 << 20 // and about this many bytes
	transferRetryMin   = 50 * time.Millisecond
	transferRetryMax   = 2 * time.Second
	transferPoll       = time.Second // a round even without a signal
)

// transferApplier is a backend that takes transfers: a group's broker
// here (fencedBackend), or the node leading it (clusterrpc.Backend).
type transferApplier interface {
	ApplyTransfers(ctx context.Context, ts []*core.Transfer) (int, error)
}

// ApplyTransfers implements transferApplier; like a send, a transfer
// that succeeded is committed, and its answer is not fenced.
func (f fencedBackend) ApplyTransfers(ctx context.Context, ts []*core.Transfer) (int, error) {
	return f.b.ApplyTransfers(ctx, ts)
}

// transferConfig is what makes data group g's broker of namespace ns
// (0: the default one) send what it forwards to other groups by
// transfer.
func (r *routed) transferConfig(g, ns uint64) core.TransferConfig {
	return core.TransferConfig{
		Group: g,
		Locate: func(ctx context.Context, name string) (uint64, error) {
			return r.groupOf(ctx, qualify(ns, name), false)
		},
		MaxOutbox: r.cl.opts.MaxOutbox,
	}
}

// pumpNamespace runs the pumps of namespace ns's broker b in group g (lg)
// until the group's Session ends, as its brokers do, or the returned
// function is called (the namespace is dropped).
func (r *routed) pumpNamespace(lg *localGroup, g, ns uint64, b *core.Broker) context.CancelFunc {
	ctx, cancel := context.WithCancel(r.cl.ctx)
	go func() {
		defer cancel()
		select {
		case <-lg.sess.Done():
		case <-ctx.Done():
		}
	}()
	go r.pumpTransfers(ctx, g, ns, b, lg.sess.Valid)
	return cancel
}

// pumpTransfers runs the outbox pumps of b, namespace ns's broker in
// group g, one per other data group, until ctx ends (the Session b
// serves on ends).
func (r *routed) pumpTransfers(ctx context.Context, g, ns uint64, b *core.Broker, valid func() bool) {
	var wg sync.WaitGroup
	for tg := uint64(1); tg <= uint64(r.meta.DataGroups()); tg++ {
		if tg == g {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.pump(ctx, g, tg, ns, b, valid)
		}()
	}
	wg.Wait()
}

// pump hands b's outbox for group tg over, round after round, retrying
// with backoff what fails for now.
func (r *routed) pump(ctx context.Context, g, tg, ns uint64, b *core.Broker, valid func() bool) {
	log := r.log.With(zap.Uint64("group", g), zap.Uint64("to", tg), zap.Uint64("namespace", ns))
	added := b.TransfersAdded(tg)
	var backoff time.Duration
	for {
		var err error
		var ts []*core.Transfer
		if !valid() {
			err = errDeposed
		} else {
			ts, err = b.PendingTransfers(tg, transferRoundCount, transferRoundBytes)
		}
		if err == nil && len(ts) > 0 {
			err = r.sendTransfers(ctx, b, g, tg, ns, ts)
		}
		wait := transferPoll
		switch {
		case err != nil:
			backoff = min(max(2*backoff, transferRetryMin), transferRetryMax)
			wait = backoff
			log.Debug("transfers to another group failed for now; retrying", zap.Error(err), zap.Duration("in", wait))
		case len(ts) > 0:
			backoff = 0
			continue
		default:
			backoff = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-added:
		case <-time.After(wait):
		}
	}
}

// sendTransfers hands ts to group tg's broker and settles the outcome in
// b's outbox (group g's): what tg applied is deleted, what it refused for
// good is dead-lettered in its source. Each outcome is counted for the
// metrics.
func (r *routed) sendTransfers(ctx context.Context, b *core.Broker, g, tg, ns uint64, ts []*core.Transfer) error {
	home := r.namespaceHome(ns)
	if ns == 0 {
		r.mu.Lock()
		home = r.home
		r.mu.Unlock()
	}
	counts := &r.xferCounts
	be, err := r.backendIn(tg, ns, home)
	if err != nil {
		counts.add(&counts.failed, g, tg, len(ts))
		return err
	}
	ap, ok := be.(transferApplier)
	if !ok {
		counts.add(&counts.failed, g, tg, len(ts))
		return &core.Error{Code: core.CodeInternal, Msg: "the target group's backend takes no transfers"}
	}
	n, aerr := ap.ApplyTransfers(ctx, ts)
	counts.add(&counts.sent, g, tg, n)
	if r.loseTransferAnswers.Load() {
		return &core.Error{Code: core.CodeOutcomeUnknown, Msg: "the answer to a transfer was lost (a test's fault)"}
	}
	if err := b.Transferred(ts[:n]); err != nil {
		return err
	}
	if aerr == nil || core.TransferRetryable(aerr) {
		counts.add(&counts.failed, g, tg, len(ts)-n)
		return aerr
	}
	counts.add(&counts.refused, g, tg, 1)
	r.log.Info("a transfer's target refused it; dead-lettered in its source", zap.String("target", ts[n].Target), zap.Error(aerr))
	return b.TransferRefused(ts[n], aerr)
}
