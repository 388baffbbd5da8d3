package conformance

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core/sas"
)

// Shared access rules and namespaces (issue 27). The rights scenarios
// define rules on a queue of their own, as Service Bus lets Manage
// callers do, and use them through the SDK and REST: each right is
// refused where it must be, with Service Bus's text. The namespace
// scenario needs a second namespace: omnibus's namespaces API makes one
// (PUT /$namespaces/{name}); against another endpoint, give a second
// namespace's connection string (--second-connection-string).

const (
	sasDoc = "Service Bus access control with Shared Access Signatures: a rule has Listen, Send and/or Manage rights (Manage implies the others) and two keys; a rule on a queue reaches that queue only;"
	nsDoc  = "Service Bus namespaces: a namespace is a container for its queues and topics;"
	// claimText is Service Bus's refusal of a missing right.
	claimText = "claim(s) are required to perform this operation"
)

// newKey returns a key as Service Bus makes them: 256 bits in base64.
func newKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// clientAs returns an SDK client of this endpoint signing with keyName
// and key, closed when the scenario ends.
func (t *T) clientAs(keyName, key string) *azservicebus.Client {
	t.live()
	cs := "Endpoint=sb://" + t.target.cs.Host + "/;SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key
	if t.target.cs.UseDevelopmentEmulator {
		cs += ";UseDevelopmentEmulator=true"
	}
	c, err := azservicebus.NewClientFromConnectionString(cs, nil)
	t.must(err, "a client signing with %s", keyName)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// sendAs sends one message to queue q with client c, within 30 s.
func (t *T) sendAs(c *azservicebus.Client, q, body string) error {
	s, err := c.NewSender(q, nil)
	if err != nil {
		return err
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	return s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil)
}

// receiveAs receives and deletes up to one message of queue q with
// client c, waiting at most wait; nil and no error when none came.
func (t *T) receiveAs(c *azservicebus.Client, q string, wait time.Duration) (*azservicebus.ReceivedMessage, error) {
	r, err := c.NewReceiverForQueue(q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		return nil, err
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.ctx, wait)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if errors.Is(err, context.DeadlineExceeded) && t.ctx.Err() == nil {
		return nil, nil
	}
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	return msgs[0], nil
}

// wantUnauthorized fails unless err is Service Bus's refusal of the claim
// over AMQP: unauthorized access saying "'claim' claim(s) are required".
func (t *T) wantUnauthorized(what string, err error, claim string) {
	t.live()
	var sbErr *azservicebus.Error
	switch {
	case err == nil:
		t.Errorf("%s was allowed, want it refused for want of %s", what, claim)
	case !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess:
		t.Errorf("%s: %v, want unauthorized access", what, err)
	case !strings.Contains(err.Error(), "'"+claim+"' "+claimText):
		t.Errorf("%s: %v, want Service Bus's text \"'%s' %s\"", what, err, claim, claimText)
	}
}

// rulesQueue creates a queue of its own with a Send, a Listen and a
// Manage rule, and returns its name and the rules' keys.
func (t *T) rulesQueue() (q string, keys map[string]string) {
	if t.target.Predeclared {
		t.Skipf("needs runtime management (rules on a queue of its own)")
	}
	keys = map[string]string{"cf-sender": newKey(), "cf-listener": newKey(), "cf-manager": newKey()}
	rights := map[string][]admin.AccessRight{
		"cf-sender":   {admin.AccessRightSend},
		"cf-listener": {admin.AccessRightListen},
		"cf-manager":  {admin.AccessRightManage, admin.AccessRightSend, admin.AccessRightListen},
	}
	var rules []admin.AuthorizationRule
	for name, key := range keys {
		rules = append(rules, admin.AuthorizationRule{KeyName: to.Ptr(name), PrimaryKey: to.Ptr(key), SecondaryKey: to.Ptr(newKey()), AccessRights: rights[name]})
	}
	a := t.target.admin
	q = "cf-rules-" + suffix()
	_, err := a.CreateQueue(t.ctx, q, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AuthorizationRules: rules}})
	t.mustCreate("a queue with authorization rules", err, func(ctx context.Context) { _, _ = a.DeleteQueue(ctx, q, nil) })
	got, err := a.GetQueue(t.ctx, q, nil)
	t.must(err, "reading the queue back")
	if got == nil || len(got.AuthorizationRules) != 3 {
		t.Fatalf("the queue came back with %d authorization rules, want 3", len(got.AuthorizationRules))
	}
	return q, keys
}

func init() {
	register(
		Scenario{Name: "access-rights-amqp", Seed: sasDoc + " a token without the claim an operation needs is refused (amqp:unauthorized-access, \"'Send' claim(s) are required to perform this operation\")", Protocol: AMQP, Run: func(t *T) {
			q, keys := t.rulesQueue()
			sender, listener, manager := t.clientAs("cf-sender", keys["cf-sender"]), t.clientAs("cf-listener", keys["cf-listener"]), t.clientAs("cf-manager", keys["cf-manager"])

			t.Check("Send")
			t.must(t.sendAs(sender, q, "sent"), "a Send rule sends")
			t.wantUnauthorized("a Listen rule sending", t.sendAs(listener, q, "not allowed"), "Send")

			t.Check("Listen")
			_, err := t.receiveAs(sender, q, 10*time.Second)
			t.wantUnauthorized("a Send rule receiving", err, "Listen")
			m, err := t.receiveAs(listener, q, 30*time.Second)
			t.must(err, "a Listen rule receives")
			if m == nil || string(m.Body) != "sent" {
				t.Fatalf("a Listen rule received %v, want the message sent", m)
			}

			t.Check("Manage implies Send and Listen")
			t.must(t.sendAs(manager, q, "managed"), "a Manage rule sends")
			if m, err := t.receiveAs(manager, q, 30*time.Second); err != nil || m == nil {
				t.Fatalf("a Manage rule receives: %v, %v", m, err)
			}

			t.Check("a queue's rule reaches that queue only")
			other := "cf-norules-" + suffix()
			_, err = t.target.admin.CreateQueue(t.ctx, other, nil)
			t.mustCreate("a queue without rules", err, func(ctx context.Context) { _, _ = t.target.admin.DeleteQueue(ctx, other, nil) })
			if err := t.sendAs(manager, other, "elsewhere"); err == nil {
				t.Errorf("a rule of queue %s sent to queue %s", q, other)
			}
		}},
		Scenario{Name: "access-rights-rest", Seed: sasDoc + " over REST a token without the claim is refused with 401 and the same text", Protocol: REST, Run: func(t *T) {
			q, keys := t.rulesQueue()
			if t.target.restBase == nil {
				t.Skipf("no HTTP endpoint given (--http)")
			}
			token := func(keyName string) string {
				return sas.Sign("http://"+t.target.cs.Host+"/"+q, keyName, keys[keyName], time.Now().Add(time.Hour))
			}
			expect401 := func(resp *RESTResponse, what, claim string) {
				t.live()
				if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(resp.Body), "'"+claim+"' "+claimText) {
					t.Errorf("%s: %d %s, want 401 saying \"'%s' %s\"", what, resp.StatusCode, resp.Body, claim, claimText)
				}
			}
			t.Check("Send")
			resp := t.RESTAuth(http.MethodPost, q+"/messages", []byte("rest"), nil, token("cf-sender"))
			t.expectStatus(resp, http.StatusCreated, "a Send rule sends")
			expect401(t.RESTAuth(http.MethodPost, q+"/messages", []byte("x"), nil, token("cf-listener")), "a Listen rule sending", "Send")

			t.Check("Listen")
			expect401(t.RESTAuth(http.MethodDelete, q+"/messages/head?timeout=1", nil, nil, token("cf-sender")), "a Send rule receiving", "Listen")
			resp = t.RESTAuth(http.MethodDelete, q+"/messages/head?timeout=30", nil, nil, token("cf-listener"))
			t.expectStatus(resp, http.StatusOK, "a Listen rule receives")

			t.Check("Manage")
			expect401(t.RESTAuth(http.MethodGet, q, nil, nil, token("cf-listener")), "a Listen rule reading the queue's description", "Manage")
			t.expectStatus(t.RESTAuth(http.MethodGet, q, nil, nil, token("cf-manager")), http.StatusOK, "a Manage rule reads the queue's description")
		}},
		Scenario{Name: "namespaces-isolated", Seed: nsDoc + " a message sent to a queue of one namespace is never seen by a queue of the same name in another", Protocol: Both, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			other := t.otherNamespace()
			q := "cf-iso-" + suffix()
			a := t.target.admin
			_, err := a.CreateQueue(t.ctx, q, nil)
			t.mustCreate("queue "+q+" here", err, func(ctx context.Context) { _, _ = a.DeleteQueue(ctx, q, nil) })
			_, err = other.admin.CreateQueue(t.ctx, q, nil)
			t.mustCreate("queue "+q+" in the other namespace", err, func(ctx context.Context) { _, _ = other.admin.DeleteQueue(ctx, q, nil) })

			t.Check("over AMQP")
			here, there := t.Client(), other.client
			t.must(t.sendAs(here, q, "here"), "sending here")
			t.must(t.sendAs(there, q, "there"), "sending in the other namespace")
			for _, c := range []struct {
				client *azservicebus.Client
				want   string
			}{{here, "here"}, {there, "there"}} {
				m, err := t.receiveAs(c.client, q, 30*time.Second)
				t.must(err, "receiving %s", c.want)
				if m == nil || string(m.Body) != c.want {
					t.Fatalf("the queue %s received %v, want only its own message", c.want, m)
				}
				if m, err := t.receiveAs(c.client, q, 2*time.Second); err != nil || m != nil {
					t.Fatalf("the queue %s received a second message %v (%v): the other namespace's", c.want, m, err)
				}
			}

			t.Check("over REST")
			if t.target.restBase == nil {
				return // the AMQP half stands on its own
			}
			resp := t.REST(http.MethodPost, q+"/messages", []byte("rest here"), nil)
			t.expectStatus(resp, http.StatusCreated, "a REST send here")
			if m, err := t.receiveAs(there, q, 2*time.Second); err != nil || m != nil {
				t.Fatalf("the other namespace received %v (%v), sent over REST here", m, err)
			}
		}},
	)
}

// otherNS is a second namespace of the endpoint: an SDK client and an
// admin client of it.
type otherNS struct {
	client *azservicebus.Client
	admin  *admin.Client
}

// otherNamespace returns a second namespace: the one of
// --second-connection-string, or one made with omnibus's namespaces API
// (deleted when the scenario ends) and reached by key name. It skips
// when neither is there.
func (t *T) otherNamespace() otherNS {
	tg := t.target
	cs := tg.SecondConnectionString
	if cs == "" {
		if tg.restBase == nil {
			t.Skipf("needs a second namespace: give --second-connection-string, or --http of an omnibus (PUT /$namespaces/{name})")
		}
		name := "cf-ns-" + suffix()
		path := "$namespaces/" + name
		resp := t.REST(http.MethodPut, path, nil, nil)
		if resp.StatusCode != http.StatusCreated {
			t.Skipf("needs a second namespace: the endpoint made none (PUT /%s: %d) and no --second-connection-string was given", path, resp.StatusCode)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, tg.restBase.String()+"/"+path, nil)
			if err == nil {
				req.Header.Set("Authorization", tg.token(path))
				if resp, err := tg.httpc.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
		cs = "Endpoint=sb://" + tg.cs.Host + "/;SharedAccessKeyName=" + tg.cs.SharedAccessKeyName + "@" + name +
			";SharedAccessKey=" + tg.cs.SharedAccessKey
		if tg.cs.UseDevelopmentEmulator {
			cs += ";UseDevelopmentEmulator=true"
		}
	}
	parsed, err := sas.ParseConnectionString(cs)
	t.must(err, "the second namespace's connection string")
	c, err := azservicebus.NewClientFromConnectionString(cs, nil)
	t.must(err, "a client of the second namespace")
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	opts := &admin.ClientOptions{}
	if tg.restBase != nil && (tg.SecondConnectionString == "" || parsed.Host == tg.cs.Host) {
		opts.ClientOptions = azcore.ClientOptions{Transport: rebase{base: tg.restBase, c: tg.httpc}}
	}
	adminCS := "Endpoint=sb://" + parsed.Host + "/;SharedAccessKeyName=" + parsed.SharedAccessKeyName + ";SharedAccessKey=" + parsed.SharedAccessKey
	ac, err := admin.NewClientFromConnectionString(adminCS, opts)
	t.must(err, "an admin client of the second namespace")
	return otherNS{client: c, admin: ac}
}
