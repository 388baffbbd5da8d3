package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeAt GETs /metrics from addr and parses the text format; it returns
// an error instead of failing, for use inside waits.
func scrapeAt(addr string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape %s: %d %s", addr, resp.StatusCode, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// value returns the value of family name's series with exactly the given
// labels (a histogram's sample count), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range fams[name].GetMetric() {
		if len(m.Label) != len(want) {
			continue
		}
		match := true
		for _, l := range m.Label {
			match = match && want[l.GetName()] == l.GetValue()
		}
		switch {
		case !match:
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// metricsCheck is one expectation on a scrape: nil when it holds.
type metricsCheck func(fams map[string]*dto.MetricFamily) error

// is expects the series to have exactly v.
func is(v float64, name string, labels ...string) metricsCheck {
	return func(fams map[string]*dto.MetricFamily) error {
		got, ok := value(fams, name, labels...)
		if !ok || got != v {
			return fmt.Errorf("%s%v = %v (present: %t), want %v", name, labels, got, ok, v)
		}
		return nil
	}
}

// atLeast expects the series to be there with at least v.
func atLeast(v float64, name string, labels ...string) metricsCheck {
	return func(fams map[string]*dto.MetricFamily) error {
		got, ok := value(fams, name, labels...)
		if !ok || got < v {
			return fmt.Errorf("%s%v = %v (present: %t), want at least %v", name, labels, got, ok, v)
		}
		return nil
	}
}

// absent expects no family name at all.
func absent(name string) metricsCheck {
	return func(fams map[string]*dto.MetricFamily) error {
		if _, ok := fams[name]; ok {
			return fmt.Errorf("%s is there, want none", name)
		}
		return nil
	}
}

// waitMetrics scrapes the cluster node c until every check holds, or fails
// after a minute with what the last scrape missed.
func waitMetrics(t *testing.T, c *Cluster, checks ...metricsCheck) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		fams, err := scrapeAt(c.MetricsAddr().String())
		if err == nil {
			for _, check := range checks {
				if err = check(fams); err != nil {
					break
				}
			}
		}
		if err == nil {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d's metrics: %v", c.Node().ID(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterNodesServeMetrics scrapes every node of a three-node cluster:
// each reports its Raft state (leader or not, term, indexes, which peers
// it hears), the leader its broker's metrics too, moved by what an SDK
// sent through a follower; after the leader stops, the new one serves the
// broker's metrics, rebuilt from the replicated store, and reports the
// stopped node unreachable.
func TestClusterNodesServeMetrics(t *testing.T) {
	nodes := startTestClusterWith(t, func(o *Options) { o.MetricsAddr = "127.0.0.1:0" })
	leader := waitLeader(t, nodes)
	id := func(n uint64) string { return fmt.Sprint(n) }
	var followers []uint64
	for n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cl, err := azservicebus.NewClientFromConnectionString(nodes[followers[0]].ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	s, err := cl.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "m%d", i)}, nil); err != nil {
			t.Fatalf("send: %v", err)
		}
	}

	lf := waitMetrics(t, nodes[leader],
		is(1, "omnibus_raft_is_leader"), is(1, "omnibus_raft_serving"), is(float64(leader), "omnibus_raft_leader_id"),
		is(1, "omnibus_raft_peer_reachable", "peer", id(followers[0])),
		is(1, "omnibus_raft_peer_reachable", "peer", id(followers[1])),
		atLeast(1, "omnibus_raft_peer_match_index", "peer", id(followers[0])),
		is(3, "omnibus_raft_members", "role", "voter"),
		atLeast(1, "omnibus_raft_log_fsync_duration_seconds"),
		is(3, "omnibus_incoming_messages_total", "namespace", "sbemulatorns", "entity", "orders", "kind", "queue"),
		is(3, "omnibus_active_messages", "namespace", "sbemulatorns", "entity", "orders", "kind", "queue"),
		atLeast(1, "go_goroutines"))
	commit, _ := value(lf, "omnibus_raft_commit_index")
	term, _ := value(lf, "omnibus_raft_term")
	if lease, _ := value(lf, "omnibus_raft_lease_seconds"); lease <= 0 {
		t.Errorf("the serving leader reports a lease of %v s", lease)
	}
	for _, f := range followers {
		waitMetrics(t, nodes[f],
			is(0, "omnibus_raft_is_leader"), is(0, "omnibus_raft_serving"), is(float64(leader), "omnibus_raft_leader_id"),
			is(term, "omnibus_raft_term"), atLeast(commit, "omnibus_raft_applied_index"),
			is(1, "omnibus_raft_peer_reachable", "peer", id(leader)),
			absent("omnibus_raft_peer_match_index"), absent("omnibus_incoming_messages_total"),
			atLeast(1, "go_goroutines"))
	}

	if err := nodes[leader].Shutdown(ctx); err != nil {
		t.Fatalf("stopping the leader: %v", err)
	}
	old := leader
	delete(nodes, leader)
	leader = waitLeader(t, nodes)
	waitMetrics(t, nodes[leader],
		is(1, "omnibus_raft_is_leader"), is(1, "omnibus_raft_serving"), atLeast(term+1, "omnibus_raft_term"),
		is(0, "omnibus_raft_peer_reachable", "peer", id(old)),
		is(3, "omnibus_active_messages", "namespace", "sbemulatorns", "entity", "orders", "kind", "queue"))
	for n, c := range nodes {
		if n != leader {
			waitMetrics(t, c, is(0, "omnibus_raft_serving"), is(float64(leader), "omnibus_raft_leader_id"),
				absent("omnibus_active_messages"))
		}
	}
}
