package conformance

import "testing"

// TestScenarioNodes: against several nodes a scenario's senders and its
// other clients use different nodes, and scenarios spread over them.
func TestScenarioNodes(t *testing.T) {
	tg := &Target{ConnectionString: "n1", Nodes: []string{"n2", "n3"}}
	senders := map[string]bool{}
	for _, s := range Scenarios() {
		st := &T{target: tg, name: s.Name}
		send := tg.nodeConnectionStrings()[st.scenarioNode()]
		if recv := st.clientConnectionString(); recv == send {
			t.Fatalf("%s sends and receives through %s", s.Name, send)
		}
		senders[send] = true
	}
	if len(senders) != 3 {
		t.Fatalf("the scenarios send through %d of 3 nodes", len(senders))
	}
	one := &T{target: &Target{ConnectionString: "n1"}, name: "x"}
	if one.clientConnectionString() != "n1" || one.scenarioNode() != 0 {
		t.Fatalf("a single endpoint: client %s, sender node %d", one.clientConnectionString(), one.scenarioNode())
	}
}
