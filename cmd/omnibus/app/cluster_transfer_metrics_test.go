package app

import (
	"fmt"
	"testing"
)

// TestClusterTransferMetrics: the node leading a data group reports its
// outbox of transfers to other groups (omnibus_transfer_outbox) and the
// transfers it handed over (omnibus_transfers_sent_total, by source and
// target group); a node that does not lead the group reports no outbox
// for it. While the answers to the transfers are lost (a test's fault)
// the outbox keeps them, each round sent again; once they arrive it
// drains to 0.
func TestClusterTransferMetrics(t *testing.T) {
	tc := startTransferCluster(t, func(o *Options) { o.MetricsAddr = "127.0.0.1:0" })
	if _, err := tc.adm.CreateQueue(tc.ctx, "far", nil); err != nil {
		t.Fatal(err)
	}
	src := tc.queueOutside("near", "far", nil)
	tc.forwardTo(src, "far", false)
	g, tg := tc.group(src), tc.group("far")
	leader := tc.nodes[g] // each node leads the group of its number (waitGroupsServing)
	group, to := fmt.Sprint(g), fmt.Sprint(tg)

	leader.routed.loseTransferAnswers.Store(true)
	tc.send(src, bodies("m", 3)...)
	waitMetrics(t, leader,
		is(3, "omnibus_transfer_outbox", "group", group),
		atLeast(6, "omnibus_transfers_sent_total", "group", group, "to", to)) // sent at least twice each
	for id, c := range tc.nodes {
		if id == g {
			continue
		}
		fams, err := scrapeAt(c.MetricsAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := value(fams, "omnibus_transfer_outbox", "group", group); ok {
			t.Errorf("node %d, which does not lead group %d, reports its outbox: %v", id, g, v)
		}
	}

	leader.routed.loseTransferAnswers.Store(false)
	waitMetrics(t, leader, is(0, "omnibus_transfer_outbox", "group", group))
	inOrder(t, "far", tc.receiveAll("far", 3), bodies("m", 3))
}
