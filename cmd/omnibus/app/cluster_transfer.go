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

// transferConfig is what makes data group g's broker send what it
// forwards to other groups by transfer.
func (r *routed) transferConfig(g uint64) core.TransferConfig {
	return core.TransferConfig{
		Group: g,
		Locate: func(ctx context.Context, name string) (uint64, error) {
			return r.groupOf(ctx, name, false)
		},
		MaxOutbox: r.cl.opts.MaxOutbox,
	}
}

// pumpTransfers runs group g's outbox pumps, one per other data group,
// until ctx ends (the Session b serves on ends).
func (r *routed) pumpTransfers(ctx context.Context, g uint64, b *core.Broker, valid func() bool) {
	var wg sync.WaitGroup
	for tg := uint64(1); tg <= uint64(r.meta.DataGroups()); tg++ {
		if tg == g {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.pump(ctx, g, tg, b, valid)
		}()
	}
	wg.Wait()
}

// pump hands b's outbox for group tg over, round after round, retrying
// with backoff what fails for now.
func (r *routed) pump(ctx context.Context, g, tg uint64, b *core.Broker, valid func() bool) {
	log := r.log.With(zap.Uint64("group", g), zap.Uint64("to", tg))
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
			err = r.sendTransfers(ctx, b, tg, ts)
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
// b's outbox: what tg applied is deleted, what it refused for good is
// dead-lettered in its source.
func (r *routed) sendTransfers(ctx context.Context, b *core.Broker, tg uint64, ts []*core.Transfer) error {
	be, err := r.backend(tg)
	if err != nil {
		return err
	}
	ap, ok := be.(transferApplier)
	if !ok {
		return &core.Error{Code: core.CodeInternal, Msg: "the target group's backend takes no transfers"}
	}
	n, aerr := ap.ApplyTransfers(ctx, ts)
	if r.loseTransferAnswers.Load() {
		return &core.Error{Code: core.CodeOutcomeUnknown, Msg: "the answer to a transfer was lost (a test's fault)"}
	}
	if err := b.Transferred(ts[:n]); err != nil {
		return err
	}
	if aerr == nil || core.TransferRetryable(aerr) {
		return aerr
	}
	r.log.Info("a transfer's target refused it; dead-lettered in its source", zap.String("target", ts[n].Target), zap.Error(aerr))
	return b.TransferRefused(ts[n], aerr)
}
