package app

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/storage"
)

// Check opens the store o names, recovers a broker on it as a start
// would (no listener is started) and compares the broker's memory with
// the store (core.Broker.Check). It returns the inconsistencies found,
// none when the data directory is consistent, or an error when the store
// cannot be opened or recovered. The broker must not be running on the
// same directory (the store refuses a second opener).
func Check(o Options) ([]string, error) {
	o.setDefaults()
	st, err := openStore(o)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// The default namespace's name only labels it here (no findings name
	// it), and one no other namespace can have.
	reg, err := namespace.Open(namespace.Config{Store: st, Clock: o.Clock, NoSweep: true, Logger: o.Logger.Named("namespace"), DefaultName: "(default)",
		NewBroker: func(name string, s storage.Store, clk clock.Clock) (*core.Broker, error) {
			return core.New(core.Config{Store: s, Clock: clk, Logger: o.Logger.Named("core"), Namespace: name})
		}})
	if err != nil {
		return nil, fmt.Errorf("recovering the broker from %s: %w", o.DataDir, err)
	}
	defer reg.Close()
	return checkNamespaces(reg)
}

// checkNamespaces checks every namespace's broker; a finding of a
// namespace but the default one names it.
func checkNamespaces(reg *namespace.Registry) ([]string, error) {
	var all []string
	for _, ns := range reg.List() {
		found, err := findings(ns.Broker().Check())
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns.Name(), err)
		}
		for _, f := range found {
			if !ns.IsDefault() {
				f = "namespace " + ns.Name() + ": " + f
			}
			all = append(all, f)
		}
	}
	return all, nil
}

// checkConsistency runs the consistency check on a freshly recovered
// broker (Options.CheckConsistency) and logs what it finds; the start
// goes on either way.
func (a *App) checkConsistency() error {
	found, err := checkNamespaces(a.Namespaces)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		a.log.Info("consistency check: memory and store agree")
		return nil
	}
	for _, f := range found {
		a.log.Warn("consistency check", zap.String("finding", f))
	}
	a.log.Warn("consistency check found inconsistencies; omnibus starts anyway", zap.Int("findings", len(found)))
	return nil
}

func findings(err error) ([]string, error) {
	var ce *core.CheckError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &ce):
		return ce.Findings, nil
	}
	return nil, err
}
