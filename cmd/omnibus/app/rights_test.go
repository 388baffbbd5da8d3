package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Keys of the rules the rights tests define (44 characters, as Service
// Bus makes them).
const (
	senderKey  = "c2VuZGVyLWtleS1zZW5kZXIta2V5LXNlbmRlci1rZXk="
	senderKey2 = "c2VuZGVyLWtleS10d28tc2VuZGVyLWtleS10d28tMjI="
	readerKey  = "cmVhZGVyLWtleS1yZWFkZXIta2V5LXJlYWRlci1rZXk="
	adminKey   = "YWRtaW4ta2V5LWFkbWluLWtleS1hZG1pbi1rZXktYWQ="
)

const shopRules = `{"AuthorizationRules":[
	{"KeyName":"sender","PrimaryKey":"` + senderKey + `","Rights":["Send"]},
	{"KeyName":"listener","PrimaryKey":"` + readerKey + `","Rights":["Listen"]},
	{"KeyName":"admin","PrimaryKey":"` + adminKey + `","Rights":["Manage","Send","Listen"]}]}`

// wantRefused fails unless err is Service Bus's refusal of a missing
// claim: over AMQP amqp:unauthorized-access, over HTTP 401, with the text
// "Unauthorized access. '<claim>' claim(s) are required".
func wantRefused(t *testing.T, what string, err error, claim string) {
	t.Helper()
	text := "Unauthorized access. '" + claim + "' claim(s) are required to perform this operation."
	var sbErr *azservicebus.Error
	var httpErr *azcore.ResponseError
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want it refused for want of %s", what, claim)
	case errors.As(err, &sbErr):
		if sbErr.Code != azservicebus.CodeUnauthorizedAccess || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v (code %s), want unauthorized access saying %q", what, err, sbErr.Code, text)
		}
	case errors.As(err, &httpErr):
		if httpErr.StatusCode != http.StatusUnauthorized || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v, want 401 saying %q", what, err, text)
		}
	default:
		t.Errorf("%s: %v, want an unauthorized-access refusal saying %q", what, err, text)
	}
}

// TestRightsThroughTheSDK: a namespace with a Send, a Listen and a
// Manage rule, and a queue with a Listen rule of its own. Through the Go
// SDK and admin client each rule does exactly what its rights allow,
// Manage implies Send and Listen, the queue's rule reaches only its
// queue, a key of another namespace reaches nothing here, and a rotated
// key stops working at once while the new one works.
func TestRightsThroughTheSDK(t *testing.T) {
	a := startNamespaces(t, false)
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/shop", shopRules); st != http.StatusCreated {
		t.Fatalf("create shop: %d %s", st, body)
	}
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/other", ""); st != http.StatusCreated {
		t.Fatalf("create other: %d %s", st, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	shopAdmin := adminFor(t, a, "admin@shop", adminKey)
	if _, err := shopAdmin.CreateQueue(ctx, "orders", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		AuthorizationRules: []admin.AuthorizationRule{{KeyName: to.Ptr("reader"), PrimaryKey: to.Ptr(readerKey),
			SecondaryKey: to.Ptr(senderKey2), AccessRights: []admin.AccessRight{admin.AccessRightListen}}},
	}}); err != nil {
		t.Fatalf("admin creates a queue with a rule: %v", err)
	}
	if _, err := shopAdmin.CreateQueue(ctx, "other", nil); err != nil {
		t.Fatal(err)
	}
	got, err := shopAdmin.GetQueue(ctx, "orders", nil)
	if err != nil || len(got.AuthorizationRules) != 1 || *got.AuthorizationRules[0].KeyName != "reader" ||
		len(got.AuthorizationRules[0].AccessRights) != 1 || got.AuthorizationRules[0].AccessRights[0] != admin.AccessRightListen {
		t.Fatalf("GetQueue does not show the queue's rule: %+v, %v", got, err)
	}

	send := func(c *azservicebus.Client, q string) error {
		s, err := c.NewSender(q, nil)
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	receive := func(c *azservicebus.Client, q string) error {
		r, err := c.NewReceiverForQueue(q, nil)
		if err != nil {
			return err
		}
		defer r.Close(ctx)
		_, err = r.PeekMessages(ctx, 1, nil)
		return err
	}
	byKey := func(keyName, key string) *azservicebus.Client { return clientByHost(t, a, "shop", keyName, key) }

	sender, listener, manager := byKey("sender", senderKey), byKey("listener", readerKey), byKey("admin", adminKey)
	if err := send(sender, "orders"); err != nil {
		t.Errorf("Send rule sends: %v", err)
	}
	wantRefused(t, "Send rule receives", receive(sender, "orders"), "Listen")
	if err := receive(listener, "orders"); err != nil {
		t.Errorf("Listen rule receives: %v", err)
	}
	wantRefused(t, "Listen rule sends", send(listener, "orders"), "Send")
	if err := send(manager, "orders"); err != nil {
		t.Errorf("Manage rule sends: %v", err)
	}
	if err := receive(manager, "orders"); err != nil {
		t.Errorf("Manage rule receives: %v", err)
	}
	_, err = adminFor(t, a, "sender@shop", senderKey).CreateQueue(ctx, "nope", nil)
	wantRefused(t, "Send rule creates a queue", err, "Manage")
	_, err = adminFor(t, a, "listener@shop", readerKey).GetQueue(ctx, "orders", nil)
	wantRefused(t, "Listen rule reads a queue's description", err, "Manage")

	// The queue's own rule, with either of its keys, on its queue only.
	reader := byKey("reader", readerKey)
	if err := receive(reader, "orders"); err != nil {
		t.Errorf("the queue's Listen rule receives from it: %v", err)
	}
	if err := receive(byKey("reader", senderKey2), "orders"); err != nil {
		t.Errorf("the queue's rule with its secondary key: %v", err)
	}
	wantRefused(t, "the queue's Listen rule sends to it", send(reader, "orders"), "Send")
	if err := receive(byKey("reader", readerKey), "other"); err == nil {
		t.Error("the queue's rule reached another queue")
	}

	// The root key works only where the namespace has no rules of its
	// own; a key of another namespace is refused.
	if err := send(byKey(DefaultKeyName, DefaultKey), "orders"); err == nil {
		t.Error("the root key reached a namespace with rules of its own")
	}
	if err := send(clientByKeyName(t, a, "sender@other", senderKey), "orders"); err == nil {
		t.Error("a key name of namespace other reached shop's queue")
	}
	if err := send(clientByHost(t, a, "shop", "admin@other", adminKey), "orders"); err == nil {
		t.Error("a token for namespace other was accepted on a connection to shop")
	}

	// Rotation: the sender rule gets a new key; the old one stops working
	// for new tokens at once, the new one works.
	rotated := strings.Replace(shopRules, senderKey, senderKey2, 1)
	if st, body := nsCallIfMatch(t, a, "/$namespaces/shop", rotated); st != http.StatusOK {
		t.Fatalf("rotate: %d %s", st, body)
	}
	if err := send(byKey("sender", senderKey), "orders"); err == nil {
		t.Error("the rotated-out key still sends")
	}
	if err := send(byKey("sender", senderKey2), "orders"); err != nil {
		t.Errorf("the new key: %v", err)
	}
}

// nsCallIfMatch PUTs body to path with If-Match: * and the root key.
func nsCallIfMatch(t *testing.T, a *App, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://"+a.HTTPAddr().String()+path, strings.NewReader(body))
	req.Header.Set("If-Match", "*")
	req.Header.Set("Authorization", rootToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
