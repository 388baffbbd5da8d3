package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw/console"
)

// scrapeMetrics GETs /metrics from the app's metrics listener and parses
// the text format, or fails.
func scrapeMetrics(t *testing.T, a *App) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := scrapeAt(a.MetricsAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series returns the value of family name's series with exactly the
// given labels (a histogram's sample count), or fails.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := value(fams, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// TestMetricsMoveByWhatClientsDid sends, schedules, receives, completes,
// abandons, defers and dead-letters known numbers of messages with the
// official Go SDK, makes REST requests that succeed and fail, and checks
// that every scraped counter and gauge moved by exactly those numbers.
func TestMetricsMoveByWhatClientsDid(t *testing.T) {
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-",
		MetricsAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := a.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	before := scrapeMetrics(t, a)
	q := []string{"namespace", a.Namespace, "entity", "orders", "kind", "queue"}
	delta := func(after map[string]*dto.MetricFamily, name string, labels ...string) float64 {
		return series(t, after, name, labels...) - series(t, before, name, labels...)
	}

	c, err := azservicebus.NewClientFromConnectionString(a.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	const sent = 10
	for i := range sent {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("later")}}, time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	var got []*azservicebus.ReceivedMessage
	for len(got) < 7 {
		msgs, err := r.ReceiveMessages(ctx, 7-len(got), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
	for _, m := range got[:3] {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.AbandonMessage(ctx, got[3], nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range got[4:6] {
		if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.DeferMessage(ctx, got[6], nil); err != nil {
		t.Fatal(err)
	}
	// A user error: renewing the lock of a message already completed
	// ($management answers lock lost).
	var sbErr *azservicebus.Error
	if err := r.RenewMessageLock(ctx, got[0], nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Fatalf("renewing a completed message's lock: %v, want lock lost", err)
	}
	dlq, err := c.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter,
		ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := dlq.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead-letter receive: %v %d", err, len(dead))
	}
	// Three REST requests: one that succeeds, one without a token (401),
	// one deleting an entity that does not exist (404; a GET of one is an
	// empty feed, 200, as on Service Bus).
	tok := sas.Sign("http://localhost/", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour))
	for _, c := range []struct {
		method, path, token string
		want                int
	}{{http.MethodGet, "/orders", tok, http.StatusOK}, {http.MethodGet, "/orders", "", http.StatusUnauthorized},
		{http.MethodDelete, "/no-such-queue", tok, http.StatusNotFound}} {
		if status := restDo(t, a, c.method, c.path, c.token); status != c.want {
			t.Fatalf("%s %s (token %v): %d, want %d", c.method, c.path, c.token != "", status, c.want)
		}
	}
	// The web console's calls are no Service Bus requests: not counted.
	if status := restDo(t, a, http.MethodGet, console.APIPath+"entities", ""); status != http.StatusUnauthorized {
		t.Fatalf("console API without a token: %d, want 401", status)
	}
	if status := restDo(t, a, http.MethodGet, console.PagePath, ""); status != http.StatusOK {
		t.Fatalf("console page: %d, want 200", status)
	}

	after := scrapeMetrics(t, a)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"omnibus_incoming_messages_total", sent + 1}, // the scheduled one too
		{"omnibus_outgoing_messages_total", 7 + 1},    // the peek-locked seven and the dead letter
		{"omnibus_completed_messages_total", 3 + 1},   // the dead letter was received and deleted
		{"omnibus_abandoned_messages_total", 1},
		{"omnibus_deadlettered_messages_total", 2},
		{"omnibus_expired_messages_total", 0},
		{"omnibus_deferred_messages_total", 1},
		{"omnibus_lock_expiries_total", 0},
		{"omnibus_active_messages", sent - 3 - 2 - 1}, // the abandoned one is active again
		{"omnibus_deadlettered_messages", 2 - 1},
		{"omnibus_scheduled_messages", 1},
		{"omnibus_deferred_messages", 1},
		{"omnibus_messages", sent - 3 - 2 + 1 + 1},
		{"omnibus_send_latency_seconds", sent + 1}, // observations: one per message
		{"omnibus_end_to_end_latency_seconds", 7},  // first deliveries from the queue itself
	} {
		if got := delta(after, c.name, q...); got != c.want {
			t.Errorf("%s{entity=orders} moved by %v, want %v", c.name, got, c.want)
		}
	}
	if size := series(t, after, "omnibus_size_bytes", q...); size <= 0 {
		t.Errorf("size of orders: %v", size)
	}
	// HTTP: exactly the three REST requests, one success, two user errors
	// (the console's two are not counted).
	if d := delta(after, "omnibus_successful_requests_total", "protocol", "http"); d != 1 {
		t.Errorf("HTTP successful requests moved by %v, want 1", d)
	}
	if d := delta(after, "omnibus_user_errors_total", "protocol", "http"); d != 2 {
		t.Errorf("HTTP user errors moved by %v, want 2 (401, 404)", d)
	}
	// AMQP: 10 sends and 6 settlements succeeded, besides the SDK's own
	// $cbs and $management requests; the renewal is the one user error,
	// and nothing failed on the server.
	if d := delta(after, "omnibus_successful_requests_total", "protocol", "amqp"); d < sent+7 {
		t.Errorf("AMQP successful requests moved by %v, want at least %d", d, sent+7)
	}
	if d := delta(after, "omnibus_user_errors_total", "protocol", "amqp"); d != 1 {
		t.Errorf("AMQP user errors moved by %v, want 1", d)
	}
	for _, p := range []string{"amqp", "http"} {
		if d := delta(after, "omnibus_server_errors_total", "protocol", p) + delta(after, "omnibus_throttled_requests_total", "protocol", p); d != 0 {
			t.Errorf("%s server errors and throttled requests moved by %v", p, d)
		}
	}
	if n := series(t, after, "omnibus_active_connections", "protocol", "amqp"); n != 1 {
		t.Errorf("active AMQP connections: %v, want the SDK client's 1", n)
	}
	if d := delta(after, "omnibus_connections_opened_total", "protocol", "amqp"); d != 1 {
		t.Errorf("AMQP connections opened moved by %v, want 1", d)
	}
	if n := series(t, after, "omnibus_entities", "namespace", a.Namespace, "kind", "queue"); n != 1 {
		t.Errorf("queues: %v", n)
	}
	if n := series(t, after, "omnibus_store_batches_total", "sync", "true"); n <= 0 {
		t.Errorf("synced store batches: %v", n)
	}

	// The client goes: its connection is counted closed once the server
	// has seen it end.
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		now := scrapeMetrics(t, a)
		if series(t, now, "omnibus_active_connections", "protocol", "amqp") == 0 &&
			delta(now, "omnibus_connections_closed_total", "protocol", "amqp") == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the SDK client's connection was never counted closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restDo makes a request on the app's HTTP listener with token (none if
// empty) and returns the status.
func restDo(t *testing.T, a *App, method, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+a.HTTPAddr().String()+path, nil)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestMetricsFollowProtectedMode: with the publicly known key the metrics
// listener serves only loopback peers, like the fronts; with a key of
// one's own it serves anyone, without a token.
func TestMetricsFollowProtectedMode(t *testing.T) {
	remote := nonLoopbackIP(t)
	for _, c := range []struct {
		key   string
		serve bool
	}{{DefaultKey, false}, {"a key of my own", true}} {
		a, err := Start(Options{Memory: true, Key: c.key, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-",
			MetricsAddr: ":0", Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(a.MetricsAddr().String())
		for _, host := range []string{"127.0.0.1", remote.String()} {
			resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + net.JoinHostPort(host, port) + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served := host == "127.0.0.1" || c.serve
			switch {
			case served && (resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "omnibus_entities")):
				t.Errorf("key %q, %s: %d, want the metrics", c.key, host, resp.StatusCode)
			case !served && (resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "protected mode")):
				t.Errorf("key %q, %s: %d %s, want 403 explaining protected mode", c.key, host, resp.StatusCode, b)
			}
		}
		a.Shutdown(context.Background())
	}
}
