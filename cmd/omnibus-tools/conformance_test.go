package main

import (
	"testing"

	"github.com/omnibusmq/omnibus/conformance"
	"github.com/omnibusmq/omnibus/core"
)

// TestEveryFaultHasItsOwnCoreSwitch: --prove-failure can inject every
// fault the suite names, each as one switch of core.Faults that no other
// fault shares.
func TestEveryFaultHasItsOwnCoreSwitch(t *testing.T) {
	seen := map[core.Faults]conformance.Fault{}
	for _, f := range conformance.AllFaults {
		cf, err := coreFaults(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if cf == (core.Faults{}) {
			t.Errorf("%s switches nothing on", f)
		}
		if other, dup := seen[cf]; dup {
			t.Errorf("%s and %s switch on the same core faults %+v", f, other, cf)
		}
		seen[cf] = f
	}
	if _, err := coreFaults("no-such-fault"); err == nil {
		t.Errorf("an unknown fault has a core switch")
	}
}
