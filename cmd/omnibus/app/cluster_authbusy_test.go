package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw/console"
)

// TestClusterTokenCheckedWithoutLeaderIsRetryable: a token that cannot be
// checked because the group holding the rules has no reachable leader
// (the entity's data group for a queue's own rule, the meta group for a
// namespace a key name names) is answered "retry": 503 on $cbs and on
// HTTP, never 401, which the SDKs take as final (and a SASL PLAIN login
// sys-temp, not auth). A token of the namespace's own rules still
// verifies.
func TestClusterTokenCheckedWithoutLeaderIsRetryable(t *testing.T) {
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	waitForCond(t, "a leader of the data group", func() error {
		if groupLeaders(nodes)[1] == 0 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	waitMetaServing(t, nodes)
	key := core.NewAccessKey()
	b := routedBroker(t, nodes[1])
	for {
		_, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "guarded",
			AuthorizationRules: []core.AuthorizationRule{{KeyName: "q-sender", PrimaryKey: key, Rights: sas.Send}}})
		if err == nil {
			break
		}
		if core.CodeOf(err) != core.CodeServerBusy || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the data group's leadership settles
	}

	// Node 1 alone: neither its data group nor the meta group has a leader.
	for _, id := range []uint64{2, 3} {
		if err := nodes[id].Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		delete(nodes, id)
	}
	waitForCond(t, "node 1 to know no meta leader and to serve no data group", func() error {
		if l := nodes[1].node.Leader(); l != 0 {
			return fmt.Errorf("meta leader %d", l)
		}
		if l := groupLeaders(nodes); len(l) != 0 {
			return fmt.Errorf("data groups served: %v", l)
		}
		return nil
	})
	via := nodes[1]
	expires := time.Now().Add(time.Hour)
	entityToken := sas.Sign("https://localhost/guarded", "q-sender", key, expires)
	unknownNS := sas.Sign("https://localhost/guarded", "rule@elsewhere", key, expires)
	rootToken := sas.Sign("https://localhost/guarded", DefaultKeyName, DefaultKey, expires)

	conn, err := amqp.Dial(ctx, "amqp://"+via.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range []struct {
		what, token string
		want        int32
	}{
		{"the queue's own rule, its group without a leader", entityToken, 503},
		{"a key name of a namespace unknown while the meta group has no leader", unknownNS, 503},
		// The root rule verifies without the groups; the queue it names
		// cannot be looked up now: retry as well.
		{"the namespace's root rule", rootToken, 503},
		{"a wrong key of the namespace's root rule", sas.Sign("https://localhost/guarded", DefaultKeyName, key, expires), 401},
	} {
		if status, desc := putToken(t, conn, "amqp://localhost/guarded", c.token); status != c.want {
			t.Errorf("$cbs put-token with %s: %d %q, want %d", c.what, status, desc, c.want)
		}
	}

	// SASL PLAIN (Qpid, JMS): a key of a namespace that cannot be looked
	// up now is a transient failure (sys-temp, 4), not bad credentials.
	if c, err := amqp.Dial(ctx, "amqp://"+via.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("rule@elsewhere", key)}); err == nil {
		c.Close()
		t.Errorf("SASL PLAIN with a key name of an unknown namespace, no meta leader: accepted")
	} else if !strings.Contains(err.Error(), "code 0x4") {
		t.Errorf("SASL PLAIN with a key name of an unknown namespace, no meta leader: %v, want outcome sys-temp (code 0x4)", err)
	}

	post := func(token string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+via.HTTPAddr().String()+"/guarded/messages", strings.NewReader("rest"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(entityToken); code != http.StatusServiceUnavailable {
		t.Errorf("REST send with the queue's rule, its group without a leader: %d, want 503", code)
	}
	if code := post(unknownNS); code != http.StatusServiceUnavailable {
		t.Errorf("REST send with a key name of an unknown namespace, no meta leader: %d, want 503", code)
	}

	// The console says the same: try again, not that the key is wrong.
	consoleDo := func(path, token, body string) int {
		method := http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://"+via.HTTPAddr().String()+console.APIPath+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := consoleDo("entity?path=guarded", entityToken, ""); code != http.StatusServiceUnavailable {
		t.Errorf("console call with the queue's rule, its group without a leader: %d, want 503", code)
	}
	if code := consoleDo("login", "", `{"keyName":"rule@elsewhere","key":"`+key+`"}`); code != http.StatusServiceUnavailable {
		t.Errorf("console login with a key name of an unknown namespace, no meta leader: %d, want 503", code)
	}

	// The Go SDK with the queue's connection string keeps retrying until
	// its context ends, rather than failing at once as unauthorized.
	port := via.AMQPAddr().String()[strings.LastIndex(via.AMQPAddr().String(), ":")+1:]
	cl, err := azservicebus.NewClientFromConnectionString(fmt.Sprintf(
		"Endpoint=sb://localhost:%s;SharedAccessKeyName=q-sender;SharedAccessKey=%s;EntityPath=guarded;UseDevelopmentEmulator=true;", port, key),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond, MaxRetries: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	s, err := cl.NewSender("guarded", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	t.Logf("SDK send: %v", err)
	var sbErr *azservicebus.Error
	if err == nil || (errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeUnauthorizedAccess) {
		t.Errorf("SDK send with the queue's rule, its group without a leader: %v, want a retryable failure", err)
	}
}
