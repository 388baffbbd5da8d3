package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// startNamespaces starts an in-memory omnibus with plain AMQP and HTTP
// only, and the test clock when asked.
func startNamespaces(t *testing.T, testClock bool) *App {
	t.Helper()
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", AMQPSAddr: "-", HTTPSAddr: "-",
		MetricsAddr: "-", TestClock: testClock, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

// nsCall calls the namespaces API with a token of key name keyName and
// key, returning the status and body.
func nsCall(t testing.TB, a *App, method, path, keyName, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+a.HTTPAddr().String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if keyName != "" {
		req.Header.Set("Authorization", sas.Sign("http://localhost/", keyName, key, time.Now().Add(time.Hour)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rootCall calls the namespaces API with the root key.
func rootCall(t testing.TB, a *App, method, path, body string) (int, string) {
	t.Helper()
	return nsCall(t, a, method, path, DefaultKeyName, DefaultKey, body)
}

// plainHTTP sends the admin client's https requests over http.
type plainHTTP struct{}

func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(req)
}

// adminFor returns a Go admin client on the HTTP listener whose SAS key
// name is keyName: "RootManageSharedAccessKey@t7" reaches namespace t7
// without DNS.
func adminFor(t testing.TB, a *App, keyName, key string) *admin.Client {
	t.Helper()
	_, port, _ := net.SplitHostPort(a.HTTPAddr().String())
	cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key
	c, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: plainHTTP{}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientByHost returns an SDK client for namespace ns by host name: the
// connection string names ns.localhost, which does not resolve, and
// CustomEndpoint dials the listener; the SDK opens with the host name.
func clientByHost(t testing.TB, a *App, ns, keyName, key string) *azservicebus.Client {
	t.Helper()
	_, port, _ := net.SplitHostPort(a.AMQPAddr().String())
	cs := fmt.Sprintf("Endpoint=sb://%s.localhost:%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", ns, port, keyName, key)
	c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{CustomEndpoint: a.AMQPAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// clientByKeyName returns an SDK client on localhost whose key name picks
// the namespace.
func clientByKeyName(t testing.TB, a *App, keyName, key string) *azservicebus.Client {
	t.Helper()
	_, port, _ := net.SplitHostPort(a.AMQPAddr().String())
	cs := fmt.Sprintf("Endpoint=sb://localhost:%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", port, keyName, key)
	c, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestFiftyNamespacesInParallel: 50 goroutines each create a namespace,
// a queue in it with the Go admin client, send and receive with the Go
// SDK (half reaching their namespace by host name through
// CustomEndpoint, half by key name), and see only their own messages;
// then each deletes its namespace, which leaves the others and the
// default one untouched.
func TestFiftyNamespacesInParallel(t *testing.T) {
	a := startNamespaces(t, false)
	if _, err := a.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const n, perNS = 50, 5
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("t%d", i)
			if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/"+name, ""); st != http.StatusCreated {
				t.Errorf("%s: create: %d %s", name, st, body)
				return
			}
			if _, err := adminFor(t, a, DefaultKeyName+"@"+name, DefaultKey).CreateQueue(ctx, "q", nil); err != nil {
				t.Errorf("%s: CreateQueue: %v", name, err)
				return
			}
			var c *azservicebus.Client
			if i%2 == 0 {
				c = clientByHost(t, a, name, DefaultKeyName, DefaultKey)
			} else {
				c = clientByKeyName(t, a, name, DefaultKey)
			}
			s, err := c.NewSender("q", nil)
			if err != nil {
				t.Error(err)
				return
			}
			for j := range perNS {
				if err := s.SendMessage(ctx, &azservicebus.Message{Body: fmt.Appendf(nil, "%s-%d", name, j)}, nil); err != nil {
					t.Errorf("%s: send: %v", name, err)
					return
				}
			}
			r, err := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
			if err != nil {
				t.Error(err)
				return
			}
			got := 0
			for got < perNS {
				msgs, err := r.ReceiveMessages(ctx, perNS, nil)
				if err != nil {
					t.Errorf("%s: receive: %v", name, err)
					return
				}
				for _, m := range msgs {
					if !strings.HasPrefix(string(m.Body), name+"-") {
						t.Errorf("namespace %s received %q, another namespace's message", name, m.Body)
					}
				}
				got += len(msgs)
			}
			if left, err := r.PeekMessages(ctx, 10, nil); err != nil || len(left) != 0 {
				t.Errorf("%s: %d messages left after receiving its own (%v)", name, len(left), err)
			}
			c.Close(ctx)
			if st, body := rootCall(t, a, http.MethodDelete, "/$namespaces/"+name, ""); st != http.StatusOK {
				t.Errorf("%s: delete: %d %s", name, st, body)
			}
		})
	}
	wg.Wait()
	if got := a.Namespaces.Len(); got != 1 {
		t.Errorf("%d namespaces after every test deleted its own, want the default one", got)
	}
	if c, err := a.Broker.Counts("q"); err != nil || c.Total != 0 {
		t.Errorf("the default namespace's queue holds %+v (%v): another namespace's message reached it", c, err)
	}
}
