package clustersoak

import "testing"

// TestScheduleCoversEveryKindAndRole: within 2 × len(kinds) failovers
// every fault kind hits the meta leader and a node leading only data
// groups, whatever the machine allows.
func TestScheduleCoversEveryKindAndRole(t *testing.T) {
	for _, kinds := range [][]string{faultKinds("mixed", true), faultKinds("mixed", false), faultKinds("kill", true)} {
		seen := map[string]map[bool]bool{}
		for k := 1; k <= 2*len(kinds); k++ {
			kind, meta := schedule(kinds, k)
			if seen[kind] == nil {
				seen[kind] = map[bool]bool{}
			}
			seen[kind][meta] = true
		}
		for _, kind := range kinds {
			if !seen[kind][true] || !seen[kind][false] {
				t.Errorf("kinds %v: %q hits the meta leader %v, another node %v in %d failovers",
					kinds, kind, seen[kind][true], seen[kind][false], 2*len(kinds))
			}
		}
	}
}
