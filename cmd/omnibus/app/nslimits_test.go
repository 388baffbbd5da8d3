package app

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core/namespace"
)

// limitsConfig is a Config.json of two namespaces besides the default
// one (which holds at most 2 queues and topics): "tight" with limits of
// its own (2 queues and topics, 1 AMQP connection, 1 MB per entity),
// "roomy" on the process's defaults.
const limitsConfig = `{"UserConfig": {"Namespaces": [
  {"Name": "sbemulatorns", "Limits": {"MaxEntities": 2}, "Queues": [{"Name": "orders"}, {"Name": "invoices"}]},
  {"Name": "tight",
   "Limits": {"MaxEntities": 2, "MaxConnections": 1, "MaxEntitySizeInMegabytes": 1},
   "Queues": [{"Name": "q"}]},
  {"Name": "roomy", "Queues": [{"Name": "q"}]}
 ], "Logging": {"Type": "Console"}}}`

// startWithConfig starts an in-memory omnibus on loopback with the
// Config.json body, the process's defaults edited by edit.
func startWithConfig(t *testing.T, body string, edit func(*Options)) (*App, error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Memory: true, ConfigPath: cfg, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", AMQPSAddr: "-", HTTPSAddr: "-",
		MetricsAddr: "-", Logger: zaptest.NewLogger(t)}
	if edit != nil {
		edit(&o)
	}
	a, err := Start(o)
	if err == nil {
		t.Cleanup(func() { a.Shutdown(context.Background()) })
	}
	return a, err
}

// wantQuota fails unless err is a quota refusal saying text: over AMQP
// amqp:resource-limit-exceeded, over HTTP 403.
func wantQuota(t *testing.T, what string, err error, text string) {
	t.Helper()
	var ae *amqp.Error
	var he *azcore.ResponseError
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want a quota refusal saying %q", what, text)
	case errors.As(err, &ae):
		if ae.Condition != amqp.ErrCondResourceLimitExceeded || !strings.Contains(ae.Description, text) {
			t.Errorf("%s: %v, want amqp:resource-limit-exceeded saying %q", what, err, text)
		}
	case errors.As(err, &he):
		if he.StatusCode != http.StatusForbidden || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v, want 403 saying %q", what, err, text)
		}
	default:
		t.Errorf("%s: %v, want a quota refusal saying %q", what, err, text)
	}
}

// TestNamespaceLimitsFromConfig: Config.json gives namespace "tight"
// limits of its own; each is refused there, over real sockets with the
// Go SDK and admin client, while "roomy", on the defaults, goes past
// them.
func TestNamespaceLimitsFromConfig(t *testing.T) {
	a, err := startWithConfig(t, limitsConfig, func(o *Options) { o.Limits.MaxEntities = 10 })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Entities: tight holds the file's queue and takes one more; roomy
	// takes five more.
	tight := adminFor(t, a, DefaultKeyName+"@tight", DefaultKey)
	if _, err := tight.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatalf("tight's second entity: %v", err)
	}
	_, err = tight.CreateQueue(ctx, "q3", nil)
	wantQuota(t, "tight's third entity", err, "The maximum entity count of 2 has been reached or exceeded for namespace 'tight'")
	if _, err := tight.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Errorf("a subscription in a full namespace (subscriptions do not count): %v", err)
	}
	_, err = adminFor(t, a, DefaultKeyName, DefaultKey).CreateQueue(ctx, "third", nil)
	wantQuota(t, "the default namespace's third entity", err, "The maximum entity count of 2 has been reached or exceeded for namespace 'sbemulatorns'")
	roomy := adminFor(t, a, DefaultKeyName+"@roomy", DefaultKey)
	for _, q := range []string{"a", "b", "c", "d", "e"} {
		if _, err := roomy.CreateQueue(ctx, q, nil); err != nil {
			t.Errorf("roomy's queue %s: %v", q, err)
		}
	}

	// Connections: tight's one connection is taken by the first client;
	// a second, by host name (refused at the open) or by key name
	// (refused at its token), is closed with Service Bus's
	// ConnectionsQuotaExceeded; roomy takes several at once.
	first := clientByHost(t, a, "tight", DefaultKeyName, DefaultKey)
	s, err := first.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("first")}, nil); err != nil {
		t.Fatalf("tight's first connection: %v", err)
	}
	const refusal = "ConnectionsQuotaExceeded for namespace tight. The namespace's limit of 1 concurrent connections is reached."
	for what, c := range map[string]*azservicebus.Client{
		"by host":     clientByHost(t, a, "tight", DefaultKeyName, DefaultKey),
		"by key name": clientByKeyName(t, a, DefaultKeyName+"@tight", DefaultKey),
	} {
		s2, err := c.NewSender("q", nil)
		if err == nil {
			err = s2.SendMessage(ctx, &azservicebus.Message{Body: []byte("second")}, nil)
		}
		wantQuota(t, "tight's second connection "+what, err, refusal)
	}
	for i := range 3 {
		r := clientByKeyName(t, a, DefaultKeyName+"@roomy", DefaultKey)
		rs, err := r.NewSender("q", nil)
		if err == nil {
			err = rs.SendMessage(ctx, &azservicebus.Message{Body: []byte("roomy")}, nil)
		}
		if err != nil {
			t.Errorf("roomy's connection %d: %v", i+1, err)
		}
	}

	// Entity size: tight's queue refuses a send at about 1 MB, roomy's
	// takes 2 MB.
	var sent int
	for ; sent < 2000; sent++ {
		if err = s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 1024)}, nil); err != nil {
			break
		}
	}
	wantQuota(t, "tight's queue at 1 MB", err, "The maximum entity size has been reached or exceeded for Queue: 'q'.")
	if err == nil || !strings.Contains(err.Error(), "Max entity size in bytes:1048576.") || sent > 1000 {
		t.Errorf("tight's queue took %d KiB before %v; want a 1 MB cap", sent, err)
	}
	rs, err := clientByKeyName(t, a, DefaultKeyName+"@roomy", DefaultKey).NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := rs.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 250<<10)}, nil); err != nil {
			t.Fatalf("roomy's queue refused its message %d of 250 KiB: %v", i+1, err)
		}
	}

	// Once tight's connection has closed, another takes its place. The
	// server lets go of a connection just after it answers the close, so
	// wait for that.
	if n := a.amqp.NamespaceConnections(mustNamespace(t, a, "tight")); n != 1 {
		t.Errorf("tight counts %d connections, want 1 (the refused ones are not counted)", n)
	}
	first.Close(ctx)
	for a.amqp.NamespaceConnections(mustNamespace(t, a, "tight")) != 0 {
		if ctx.Err() != nil {
			t.Fatal("tight's closed connection is still counted")
		}
		time.Sleep(time.Millisecond)
	}
	again := clientByKeyName(t, a, DefaultKeyName+"@tight", DefaultKey)
	r, err := again.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if msgs, err := r.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "first" {
		t.Errorf("tight's connection after the first closed: %v, %v", msgs, err)
	}
}

func mustNamespace(t *testing.T, a *App, name string) *namespace.Namespace {
	t.Helper()
	ns, err := a.Namespaces.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestNamespaceLimitsThroughTheAPI: PUT /$namespaces/{name} creates a
// namespace with limits; GET shows those in force (its own, the
// process's for the rest); PUT with If-Match replaces them at once;
// bad limits are refused and change nothing.
func TestNamespaceLimitsThroughTheAPI(t *testing.T) {
	a := startNamespaces(t, false)
	ctx := t.Context()
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/capped", `{"Limits":{"MaxEntities":1}}`); st != http.StatusCreated ||
		!strings.Contains(body, `"MaxEntities": 1,`) || !strings.Contains(body, `"MaxConnections": 5000`) {
		t.Fatalf("create: %d %s, want 201 with MaxEntities 1 and the default 5000 connections", st, body)
	}
	admin := adminFor(t, a, DefaultKeyName+"@capped", DefaultKey)
	if _, err := admin.CreateQueue(ctx, "one", nil); err != nil {
		t.Fatal(err)
	}
	_, err := admin.CreateQueue(ctx, "two", nil)
	wantQuota(t, "capped's second queue", err, "The maximum entity count of 1 has been reached or exceeded for namespace 'capped'")
	// The default namespace is not capped by capped's limit.
	def := adminFor(t, a, DefaultKeyName, DefaultKey)
	for _, q := range []string{"one", "two"} {
		if _, err := def.CreateQueue(ctx, q, nil); err != nil {
			t.Errorf("the default namespace's queue %s: %v", q, err)
		}
	}

	for _, tc := range []struct{ name, body, want string }{
		{"negative", `{"Limits":{"MaxEntities":-1}}`, "Limits.MaxEntities must be between 1 and 2147483647, got -1"},
		{"zero", `{"Limits":{"MaxConnections":0}}`, "Limits.MaxConnections must be between 1 and 2147483647, got 0"},
		{"not a number", `{"Limits":{"MaxEntities":"many"}}`, "cannot unmarshal string into Go struct field"},
		{"unknown limit", `{"Limits":{"MaxQueues":5}}`, `unknown field "MaxQueues"`},
	} {
		for _, path := range []string{"/$namespaces/fresh", "/$namespaces/capped"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+a.HTTPAddr().String()+path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", rootToken())
			if path == "/$namespaces/capped" {
				req.Header.Set("If-Match", "*")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 4096)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b[:n]), tc.want) {
				t.Errorf("%s on %s: %d %s, want 400 saying %q", tc.name, path, resp.StatusCode, b[:n], tc.want)
			}
		}
	}
	if _, err := a.Namespaces.Get("fresh"); err == nil {
		t.Error("a namespace refused for its limits exists")
	}
	if ns, _ := a.Namespaces.Get("capped"); ns.Limits().MaxEntities != 1 {
		t.Errorf("refused updates changed capped's limits to %+v", ns.Limits())
	}

	// Raised at run time: room at once.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+a.HTTPAddr().String()+"/$namespaces/capped",
		strings.NewReader(`{"Limits":{"MaxEntities":2}}`))
	req.Header.Set("Authorization", rootToken())
	req.Header.Set("If-Match", "*")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("raising capped's limit: %d", resp.StatusCode)
	}
	if _, err := admin.CreateQueue(ctx, "two", nil); err != nil {
		t.Errorf("capped's second queue after its limit was raised: %v", err)
	}
}

// TestStartRejectsBadLimits: a namespace's limit that is negative, not a
// number or unknown in Config.json stops the start, the error naming the
// file, the line and the property.
func TestStartRejectsBadLimits(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`"MaxConnections": 1`, `"MaxConnections": -3`,
			"line 4, column 51: UserConfig.Namespaces[1].Limits.MaxConnections: Limits.MaxConnections must be between 1 and 2147483647, got -3"},
		{`"MaxEntities": 2, "MaxConnections"`, `"MaxEntities": "two", "MaxConnections"`,
			"line 4, column 30: UserConfig.Namespaces.Limits.MaxEntities must be int64, not a JSON string"},
		{`"MaxEntities": 2, "MaxConnections"`, `"MaxQueues": 2, "MaxConnections"`,
			`line 4, column 15: unknown property "MaxQueues" in UserConfig.Namespaces[1].Limits`},
	} {
		_, err := startWithConfig(t, strings.Replace(limitsConfig, tc.from, tc.to, 1), nil)
		if err == nil || !strings.Contains(err.Error(), "Config.json: emuconfig: "+tc.want) {
			t.Errorf("Start with %s: %v, want an error naming the file and saying %s", tc.to, err, tc.want)
		}
	}
}
