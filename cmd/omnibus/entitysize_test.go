package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// --max-entity-size reaches the binary: a queue of Service Bus's smallest
// size (1 GB) capped at 64 KiB refuses a send once it holds about that,
// with Service Bus's quota text stating the cap.
func TestMaxEntitySizeAtStart(t *testing.T) {
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(killConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, bin, []string{"OMNIBUS_MAX_ENTITY_SIZE=64KiB"}, "--memory", "--config", cfg,
		"--amqp-addr", "127.0.0.1:0", "--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-")
	c, err := azservicebus.NewClientFromConnectionString(connStr(p.amqp), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var refusal error
	sent := 0
	for ; sent < 20 && refusal == nil; sent++ {
		s, err := c.NewSender("q", nil) // the SDK gives up on a link that heard resource-limit-exceeded
		if err != nil {
			t.Fatal(err)
		}
		refusal = s.SendMessage(t.Context(), &azservicebus.Message{Body: make([]byte, 10<<10)}, nil)
		_ = s.Close(context.Background())
	}
	var ae *amqp.Error
	if !errors.As(refusal, &ae) || ae.Condition != amqp.ErrCondResourceLimitExceeded ||
		!strings.Contains(ae.Description, "Max entity size in bytes:65536") {
		t.Fatalf("after %d sends of 10 KiB to a queue capped at 64 KiB: %v, want resource-limit-exceeded stating the cap", sent, refusal)
	}
	if sent < 5 {
		t.Errorf("refused after %d sends of 10 KiB, want about 6", sent)
	}
}
