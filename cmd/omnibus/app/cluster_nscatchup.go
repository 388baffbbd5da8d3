package app

import (
	"context"
	"errors"

	"github.com/omnibusmq/omnibus/core"
)

// A namespace created through one node reaches the registry of another
// when that node's copy of the meta group has applied it and its sync
// loop (nsSyncInterval) has run. A request naming the namespace through
// the other node in between would be refused as naming no namespace, so
// the registry asks to catch up first (namespace.Shared.CatchUp, bounded
// and rate-limited there): this node asks the meta leader how far it has
// applied (every change it acknowledged is applied there), waits until
// its own copy has applied as far, and syncs its registry.

// CatchUp implements namespace.Shared.
func (s sharedRegistry) CatchUp(ctx context.Context) error {
	a, err := s.r.callMeta(ctx, metaRequest{Op: metaApplied})
	if err != nil {
		return err
	}
	if err := s.r.meta.WaitApplied(ctx, a.Applied); err != nil {
		return err
	}
	if reg := s.r.namespaces(); reg != nil {
		s.r.syncNamespaces(reg)
	}
	if !s.r.configApplied() {
		// The config file's namespaces may be created yet: a name not
		// known now is to be retried, not refused (cluster_configready.go).
		return errors.New("the cluster is still applying its config file")
	}
	return nil
}

// answerApplied answers metaApplied on the meta leader: how far its copy
// of the meta group has applied.
func (r *routed) answerApplied() (metaAnswer, error) {
	if r.meta.Leader() != r.meta.ID() {
		return metaAnswer{}, &core.Error{Code: core.CodeServerBusy, Msg: "this node does not lead the meta group now; retry"}
	}
	return metaAnswer{Applied: r.meta.Applied()}, nil
}
