package conformance

import (
	"context"
	"hash/fnv"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A cluster's nodes (Target.Nodes). Any node of an omnibus cluster serves
// every entity, each link where the entity's group (or a partition's) is
// led; a scenario run against several nodes sends through one and does
// everything else (receive, settle, sessions, peek) through the next, so
// that at least one side of every entity's traffic reaches it from
// another node than its leader's, and a message crosses nodes between its
// sender and its receiver.

// nodeConnectionStrings are the endpoint's nodes: ConnectionString first.
func (tg *Target) nodeConnectionStrings() []string {
	return append([]string{tg.ConnectionString}, tg.Nodes...)
}

// scenarioNode is the node the scenario's senders use; its other
// clients use the next one. It is picked from the scenario's name, so
// scenarios spread over the nodes and a rerun uses the same ones.
func (t *T) scenarioNode() int {
	h := fnv.New32a()
	h.Write([]byte(t.name))
	return int(h.Sum32() % uint32(len(t.target.Nodes)+1))
}

// sendClient is the client the scenario's senders use: [T.Client]
// against a single endpoint, a client on another node than [T.Client]'s
// against several.
func (t *T) sendClient() *azservicebus.Client {
	if len(t.target.Nodes) == 0 {
		return t.Client()
	}
	t.mu.Lock()
	c := t.sender
	t.mu.Unlock()
	if c != nil {
		return c
	}
	c, err := azservicebus.NewClientFromConnectionString(t.target.nodeConnectionStrings()[t.scenarioNode()], nil)
	t.must(err, "SDK client for sending")
	t.mu.Lock()
	t.sender = c
	t.mu.Unlock()
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// clientConnectionString is the node [T.Client] connects to: the one
// after the senders' node.
func (t *T) clientConnectionString() string {
	cs := t.target.nodeConnectionStrings()
	return cs[(t.scenarioNode()+1)%len(cs)]
}
