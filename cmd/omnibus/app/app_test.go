package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.uber.org/zap/zaptest"
)

const testConfig = `{
  // an emulator file, comments and all
  "UserConfig": {
    "Namespaces": [{
      "Name": "sbemulatorns",
      "Queues": [{ "Name": "orders", "Properties": { "MaxDeliveryCount": 3, "LockDuration": "PT30S" } }],
      "Topics": [{ "Name": "events", "Properties": {},
        "Subscriptions": [{ "Name": "all", "Properties": {} }] }]
    }],
    "Logging": { "Type": "Console" }
  }
}`

func startTest(t *testing.T, dir string) *App {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Start(Options{DataDir: dir, ConfigPath: cfg, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", AMQPSAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return a
}

// TestRestartKeepsMessages sends through the official SDK, restarts the
// whole app on the same data directory and receives the messages.
func TestRestartKeepsMessages(t *testing.T) {
	dir := t.TempDir()
	a := startTest(t, dir)
	if !strings.Contains(a.ConnectionString(), "UseDevelopmentEmulator=true") {
		t.Fatalf("connection string %q", a.ConnectionString())
	}
	if a.Namespace != "sbemulatorns" {
		t.Errorf("namespace %q", a.Namespace)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := azservicebus.NewClientFromConnectionString(a.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"one", "two"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	r, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	locked, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(locked) != 1 {
		t.Fatalf("receive before restart: %v %d", err, len(locked))
	}
	c.Close(ctx)
	if err := a.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	a = startTest(t, dir)
	defer a.Shutdown(context.Background())
	c, err = azservicebus.NewClientFromConnectionString(a.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	r, err = c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*azservicebus.ReceivedMessage
	for len(got) < 2 {
		msgs, err := r.ReceiveMessages(ctx, 2-len(got), nil)
		if err != nil {
			t.Fatalf("receive after restart: %v", err)
		}
		got = append(got, msgs...)
	}
	counts := map[string]uint32{}
	for _, m := range got {
		counts[string(m.Body)] = m.DeliveryCount
	}
	// "one" was locked when the broker stopped: its delivery counted.
	if counts["one"] != 2 || counts["two"] != 1 {
		t.Fatalf("delivery counts after restart %v, want one:2 two:1", counts)
	}
	if _, err := a.Broker.GetEntity("events/Subscriptions/all"); err != nil {
		t.Errorf("config subscription missing after restart: %v", err)
	}
	if a.CAPath == "" || !strings.HasPrefix(a.CAPath, dir) {
		t.Errorf("generated CA %q not in the data directory", a.CAPath)
	}
}

// A Config.json holding a name or value Service Bus refuses stops the
// start, the error naming the entity and the property (or the name).
func TestStartRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`"PT30S"`, `"PT10M"`, `queue "orders": The property value for 'LockDuration' must be between 00:00:05 and 00:05:00`},
		{`"MaxDeliveryCount": 3`, `"MaxDeliveryCount": 3, "MaxSizeInMegabytes": 9223372036854775807`, `queue "orders": The specified value 9223372036854775807 is invalid. The property 'MaxSizeInMegabytes'`},
		{`"Name": "orders"`, `"Name": "a/../orders"`, `The queue name 'a/../orders' has an empty, '.' or '..' segment`},
		{`"Name": "events"`, `"Name": "events/"`, `cannot contain '/' as prefix or suffix. The supplied value is 'events/'`},
		{`"Name": "all"`, `"Name": "all~1"`, `'all~1' contains character(s) that is not allowed by Service Bus`},
	} {
		cfg := filepath.Join(t.TempDir(), "Config.json")
		bad := strings.Replace(testConfig, tc.from, tc.to, 1)
		if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := Start(Options{Memory: true, ConfigPath: cfg, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
		if err == nil {
			a.Shutdown(t.Context())
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start with %s: %v, want an error saying %s", tc.to, err, tc.want)
		}
	}
}

func TestStartReportsPortInUse(t *testing.T) {
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	_, err = Start(Options{Memory: true, AMQPAddr: a.AMQPAddr().String(), HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err == nil || !strings.Contains(err.Error(), "AMQP listener") {
		t.Fatalf("second Start on a used port: %v", err)
	}
}

// A forwarding target may come later in the file than the entity that
// forwards to it, as the emulator's files are written.
func TestConfigForwardToLaterEntity(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "Config.json")
	body := `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[
	  {"Name":"a","Properties":{"ForwardTo":"b","ForwardDeadLetteredMessagesTo":"b"}},
	  {"Name":"b"}]}],"Logging":{"Type":"Console"}}}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Start(Options{Memory: true, ConfigPath: cfg, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer a.Shutdown(context.Background())
	e, err := a.Broker.GetEntity("a")
	if err != nil || e.ForwardTo != "b" || e.ForwardDeadLetteredMessagesTo != "b" {
		t.Fatalf("queue a = %+v, %v; want forwarding to b", e, err)
	}
}
