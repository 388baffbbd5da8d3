package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// startQuotaApp starts omnibus on loopback with a queue of 1 MB: one of
// Service Bus's smallest size (1 GB) capped by --max-entity-size
// (Limits.MaxEntityBytes), so that filling it takes a moment.
func startQuotaApp(t *testing.T) *App {
	t.Helper()
	a, err := Start(Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "-", AMQPSAddr: "-", Logger: zaptest.NewLogger(t), Limits: core.Limits{MaxEntityBytes: 1 << 20}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { a.Shutdown(t.Context()) })
	if _, err := a.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "small"}); err != nil {
		t.Fatal(err)
	}
	return a
}

const wantQuotaText = "The maximum entity size has been reached or exceeded for Queue: 'small'. Size of entity in bytes:"

// Over AMQP with the official SDK: a 1 MB queue refuses a send at about
// 1 MB with amqp:resource-limit-exceeded and Service Bus's text, and
// takes messages again once some were received.
func TestQuotaOverAMQP(t *testing.T) {
	a := startQuotaApp(t)
	ctx := t.Context()
	c, err := azservicebus.NewClientFromConnectionString(a.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	send := func() error {
		// A fresh sender each time: the SDK treats resource-limit-exceeded
		// as fatal for the link it came on.
		s, err := c.NewSender("small", nil)
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		return s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 1024)}, nil)
	}
	s, err := c.NewSender("small", nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for ; sent < 2000; sent++ {
		if err = s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 1024)}, nil); err != nil {
			break
		}
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondResourceLimitExceeded || !strings.HasPrefix(ae.Description, wantQuotaText) {
		t.Fatalf("after %d sends: %v, want amqp:resource-limit-exceeded with %q", sent, err, wantQuotaText)
	}
	// 1 KiB body, a 36-character message id the SDK does not set (the
	// broker makes a 32-character one), and the per-message overhead.
	if per := 1024 + 32 + core.MessageOverhead; sent != (1<<20)/per {
		t.Errorf("a 1 MB queue took %d messages of 1 KiB, want %d", sent, (1<<20)/per)
	}
	r, err := c.NewReceiverForQueue("small", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ReceiveMessages(ctx, 5, nil)
	if err != nil || len(got) == 0 {
		t.Fatalf("receive: %d, %v", len(got), err)
	}
	for range got {
		if err := send(); err != nil {
			t.Fatalf("after receiving %d the queue still refuses: %v", len(got), err)
		}
	}
	if err := send(); !errors.As(err, &ae) || ae.Condition != amqp.ErrCondResourceLimitExceeded {
		t.Errorf("full again: %v", err)
	}
}

// restSend posts body to the REST send endpoint of path.
func restSend(t *testing.T, a *App, path, contentType string, body []byte) (int, string) {
	t.Helper()
	url := fmt.Sprintf("http://%s/%s/messages", a.HTTPAddr(), path)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sas.Sign(url, DefaultKeyName, DefaultKey, time.Now().Add(time.Hour)))
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text)
}

// Over REST: single sends get 403 with Service Bus's text once the queue
// is full; batches of tiny `{}` messages count each message's overhead,
// so a 1 MB queue holds thousands of them, not a million (issue 14).
func TestQuotaOverREST(t *testing.T) {
	a := startQuotaApp(t)
	sent := 0
	var status int
	var text string
	for ; sent < 2000; sent++ {
		if status, text = restSend(t, a, "small", "application/octet-stream", make([]byte, 1024)); status != http.StatusCreated {
			break
		}
	}
	if status != http.StatusForbidden || !strings.Contains(text, wantQuotaText) {
		t.Fatalf("after %d sends: %d %q, want 403 with %q", sent, status, text, wantQuotaText)
	}
	// The Content-Type is kept as a message property, and counts.
	if per := 1024 + 32 + len("application/octet-stream") + core.MessageOverhead; sent != (1<<20)/per {
		t.Errorf("a 1 MB queue took %d REST messages of 1 KiB, want %d", sent, (1<<20)/per)
	}

	// Empty it, then batches of 1,000 `{}` until refused.
	for c, _ := a.Broker.Counts("small"); c.Total > 0; c, _ = a.Broker.Counts("small") {
		if _, err := a.Broker.Receive(t.Context(), "small", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 500}); err != nil {
			t.Fatal(err)
		}
	}
	batch := []byte("[" + strings.TrimSuffix(strings.Repeat(`{"Body":"{}"},`, 1000), ",") + "]")
	stored := 0
	for range 1000 {
		status, text = restSend(t, a, "small", "application/vnd.microsoft.servicebus.json", batch)
		if status != http.StatusCreated {
			break
		}
		stored += 1000
	}
	if status != http.StatusForbidden || !strings.Contains(text, wantQuotaText) {
		t.Fatalf("batches of {}: %d %q, want 403 with %q", status, text, wantQuotaText)
	}
	c, err := a.Broker.Counts("small")
	if err != nil {
		t.Fatal(err)
	}
	per := 2 + 32 + core.MessageOverhead
	if max := int64((1 << 20) / per); c.Active != int64(stored) || c.Active > max || c.Active < max-1000 {
		t.Errorf("a 1 MB queue stored %d `{}` messages (%d acknowledged), want at most %d and within a batch of it", c.Active, stored, max)
	}
}
