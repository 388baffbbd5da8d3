package app

import (
	"context"
	"crypto/tls"
	"errors"
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
	"github.com/Azure/go-amqp"
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
	return nsCallAt(t, a.HTTPAddr(), method, path, keyName, key, body)
}

// nsCallAt is nsCall on the HTTP listener at addr.
func nsCallAt(t testing.TB, addr net.Addr, method, path, keyName, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr.String()+path, strings.NewReader(body))
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

// rootToken is a token of the root key for the whole server.
func rootToken() string {
	return sas.Sign("http://localhost/", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour))
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

// TestDeleteNamespaceEndsItsLinks: a receiver of the Go SDK waits on a
// namespace's queue when the namespace is deleted: it gets
// amqp:not-found (the SDK's CodeNotFound), while a receiver of another
// namespace keeps working and keeps its messages.
func TestDeleteNamespaceEndsItsLinks(t *testing.T) {
	a := startNamespaces(t, false)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, ns := range []string{"doomed", "kept"} {
		if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/"+ns, ""); st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", ns, st, body)
		}
		for _, q := range []string{"q", "q2"} {
			if _, err := adminFor(t, a, DefaultKeyName+"@"+ns, DefaultKey).CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// No retries: the first error the receiver sees must be not-found
	// (a retry would attach again and find the namespace gone anyway).
	_, port, _ := net.SplitHostPort(a.AMQPAddr().String())
	doomed, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://doomed.localhost:"+port+";SharedAccessKeyName="+DefaultKeyName+
		";SharedAccessKey="+DefaultKey+";UseDevelopmentEmulator=true", &azservicebus.ClientOptions{CustomEndpoint: a.AMQPAddr().String(),
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer doomed.Close(ctx)
	r, err := doomed.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil { // the link is attached
		t.Fatal(err)
	}
	ds, err := doomed.NewSender("q2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.SendMessage(ctx, &azservicebus.Message{Body: []byte("lost with its namespace")}, nil); err != nil {
		t.Fatal(err)
	}
	kept := clientByHost(t, a, "kept", DefaultKeyName, DefaultKey)
	s, _ := kept.NewSender("q", nil)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("kept")}, nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.ReceiveMessages(ctx, 1, nil)
		errc <- err
	}()
	if st, body := rootCall(t, a, http.MethodDelete, "/$namespaces/doomed", ""); st != http.StatusOK {
		t.Fatalf("delete: %d %s", st, body)
	}
	var sbErr *azservicebus.Error
	var amqpErr *amqp.Error
	if err := <-errc; !(errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound) &&
		!(errors.As(err, &amqpErr) && amqpErr.Condition == amqp.ErrCondNotFound) {
		t.Errorf("a receiver of the deleted namespace: %v, want amqp:not-found", err)
	}
	// An idle sender's link was detached too: its next send fails the
	// same way, not with an internal error.
	if err := ds.SendMessage(ctx, &azservicebus.Message{Body: []byte("too late")}, nil); !(errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound) &&
		!(errors.As(err, &amqpErr) && amqpErr.Condition == amqp.ErrCondNotFound) {
		t.Errorf("a sender of the deleted namespace: %v, want amqp:not-found", err)
	}
	if st, body := rootCall(t, a, http.MethodDelete, "/$namespaces/doomed", ""); st != http.StatusNotFound {
		t.Errorf("deleting it again: %d %s, want 404", st, body)
	}
	kr, _ := kept.NewReceiverForQueue("q", nil)
	if msgs, err := kr.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "kept" {
		t.Errorf("the other namespace's message: %v, %v", msgs, err)
	}
}

// TestNamespacesBadInput: each bad request gets a clear error and
// changes nothing.
func TestNamespacesBadInput(t *testing.T) {
	a := startNamespaces(t, false)
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/sales", ""); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	for _, tc := range []struct {
		method, path, key, body string
		status                  int
		want                    string
	}{
		{http.MethodPut, "/$namespaces/sales", DefaultKey, "", http.StatusConflict, "already exists"},
		{http.MethodPut, "/$namespaces/9lives", DefaultKey, "", http.StatusBadRequest, "must start with a letter"},
		{http.MethodPut, "/$namespaces/sa_les", DefaultKey, "", http.StatusBadRequest, "only letters, digits and hyphens"},
		{http.MethodPut, "/$namespaces/short", DefaultKey, `{"AuthorizationRules":[{"KeyName":"k","PrimaryKey":"short","Rights":["Send"]}]}`, http.StatusBadRequest, "is 5 characters long"},
		{http.MethodPut, "/$namespaces/twice", DefaultKey, `{"AuthorizationRules":[{"KeyName":"k","Rights":["Send"]},{"KeyName":"k","Rights":["Listen"]}]}`, http.StatusBadRequest, "defined twice"},
		{http.MethodPut, "/$namespaces/typo", DefaultKey, `{"Rules":[]}`, http.StatusBadRequest, "not valid JSON"},
		{http.MethodPut, "/$namespaces/wrongkey", "not the key", "", http.StatusUnauthorized, "InvalidSignature"},
		{http.MethodDelete, "/$namespaces/" + a.Namespace, DefaultKey, "", http.StatusBadRequest, "cannot be deleted"},
		{http.MethodDelete, "/$namespaces/nope", DefaultKey, "", http.StatusNotFound, "could not be found"},
	} {
		st, body := nsCall(t, a, tc.method, tc.path, DefaultKeyName, tc.key, tc.body)
		if st != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tc.method, tc.path, st, body, tc.status, tc.want)
		}
	}
	if n := a.Namespaces.Len(); n != 2 {
		t.Errorf("%d namespaces after the refusals, want 2", n)
	}
	// A key of namespace sales on the HTTP API of another namespace (by
	// host) is refused.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+a.HTTPAddr().String()+"/$Resources/Queues", nil)
	req.Host = a.Namespace + ".localhost"
	req.Header.Set("Authorization", sas.Sign("http://localhost/", DefaultKeyName+"@sales", DefaultKey, time.Now().Add(time.Hour)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "InvalidAudience") {
		t.Errorf("a token for sales on the default namespace's host: %d %s, want 401 InvalidAudience", resp.StatusCode, b)
	}
}

// TestOpenHostnamePicksTheNamespace: with SASL PLAIN and the root key,
// whose name picks no namespace and which carries no audience, only the
// AMQP open's hostname (and the sasl-init's) names the namespace: a
// go-amqp client dialling 127.0.0.1 with HostName sales.localhost sends
// to sales' queue, and one without reaches the default namespace's.
func TestOpenHostnamePicksTheNamespace(t *testing.T) {
	a := startNamespaces(t, false)
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/sales", ""); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := adminFor(t, a, DefaultKeyName+"@sales", DefaultKey).CreateQueue(ctx, "only-in-sales", nil); err != nil {
		t.Fatal(err)
	}
	send := func(hostName string) error {
		conn, err := amqp.Dial(ctx, "amqp://"+a.AMQPAddr().String(), &amqp.ConnOptions{
			SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey), HostName: hostName})
		if err != nil {
			return err
		}
		defer conn.Close()
		s, err := conn.NewSession(ctx, nil)
		if err != nil {
			return err
		}
		snd, err := s.NewSender(ctx, "only-in-sales", nil)
		if err != nil {
			return err
		}
		return snd.Send(ctx, amqp.NewMessage([]byte("by hostname")), nil)
	}
	if err := send("sales.localhost"); err != nil {
		t.Fatalf("sending with the open's hostname sales.localhost: %v", err)
	}
	var amqpErr *amqp.Error
	if err := send("localhost"); !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotFound {
		t.Errorf("sending with hostname localhost: %v, want amqp:not-found (the default namespace has no such queue)", err)
	}
	got := receiveN(t, ctx, clientByHost(t, a, "sales", DefaultKeyName, DefaultKey), "only-in-sales", 1)
	if string(got[0].Body) != "by hostname" {
		t.Errorf("sales received %q", got[0].Body)
	}
}

// TestTLSServerNamePicksTheNamespace: over AMQPS, the TLS server name
// names the namespace (the generated certificate covers *.localhost): a
// go-amqp client whose TLS ServerName is sales.localhost, opening with
// the host name localhost and logging in with the root key, sends to
// sales' queue.
func TestTLSServerNamePicksTheNamespace(t *testing.T) {
	a, roots, _ := startTLSApp(t, nil)
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/sales", ""); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := adminFor(t, a, DefaultKeyName+"@sales", DefaultKey).CreateQueue(ctx, "only-in-sales", nil); err != nil {
		t.Fatal(err)
	}
	tc, err := tls.Dial("tcp", a.AMQPSAddr().String(), &tls.Config{ServerName: "sales.localhost", RootCAs: roots})
	if err != nil {
		t.Fatalf("TLS to sales.localhost: %v", err)
	}
	conn, err := amqp.NewConn(ctx, tc, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey), HostName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := s.NewSender(ctx, "only-in-sales", nil)
	if err != nil {
		t.Fatalf("attaching to sales' queue over a TLS connection to sales.localhost: %v", err)
	}
	if err := snd.Send(ctx, amqp.NewMessage([]byte("by server name")), nil); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, ctx, clientByHost(t, a, "sales", DefaultKeyName, DefaultKey), "only-in-sales", 1)
	if string(got[0].Body) != "by server name" {
		t.Errorf("sales received %q", got[0].Body)
	}
}
