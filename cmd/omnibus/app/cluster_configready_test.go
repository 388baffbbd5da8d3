package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core/sas"
)

// TestClusterConfigEntitiesRetryableUntilApplied: in a new cluster with
// data groups the meta leader applies the config file a moment after the
// nodes serve. Until it has (held here by the test's gate), a link or a
// token for one of the file's queues is answered server busy (retry),
// not not-found (final for the SDKs), and no node is ready; a name the
// file does not have is still not found. An SDK send begun in that window
// succeeds once the file is applied, and every node is then ready.
func TestClusterConfigEntitiesRetryableUntilApplied(t *testing.T) {
	gate := make(chan struct{})
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 3; co.configGate = gate })
	waitGroupsServing(t, nodes)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for id, c := range nodes {
		select {
		case <-c.ConfigApplied():
			t.Fatalf("node %d says the config file is applied before the meta leader applied it", id)
		default:
		}
	}
	via := nodes[2]
	conn, err := amqp.Dial(ctx, "amqp://"+via.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	attach := func(name string) *amqp.Error {
		t.Helper()
		s, err := sess.NewSender(ctx, name, nil)
		if err == nil {
			s.Close(ctx)
			return nil
		}
		var ae *amqp.Error
		if !errors.As(err, &ae) {
			t.Fatalf("attach to %s: %v, want a refusal", name, err)
		}
		return ae
	}
	if e := attach("orders"); e == nil || e.Condition != "com.microsoft:server-busy" {
		t.Errorf("attach to the config file's queue before it is applied: %v, want com.microsoft:server-busy", e)
	}
	if e := attach("nowhere"); e == nil || e.Condition != amqp.ErrCondNotFound {
		t.Errorf("attach to a queue nobody made: %v, want amqp:not-found", e)
	}
	anon, err := amqp.Dial(ctx, "amqp://"+via.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	token := sas.Sign("https://localhost/orders", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour))
	if status, desc := putToken(t, anon, "amqp://localhost/orders", token); status != 503 {
		t.Errorf("$cbs put-token for the config file's queue before it is applied: %d %q, want 503", status, desc)
	}

	cl, err := azservicebus.NewClientFromConnectionString(via.ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: 100, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	snd, err := cl.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() { sent <- snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("early")}, nil) }()
	close(gate)
	if err := <-sent; err != nil {
		t.Fatalf("SDK send to the config file's queue, begun before the file was applied: %v", err)
	}
	for id, c := range nodes {
		select {
		case <-c.ConfigApplied():
		case <-ctx.Done():
			t.Fatalf("node %d never saw the config file applied", id)
		}
	}
}
