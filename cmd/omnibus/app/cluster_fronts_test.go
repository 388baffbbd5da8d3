package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw"
)

// TestClusterProxiesEveryFront: a follower takes every kind of client
// connection and proxies it to the leader — AMQPS with the cluster's
// certificate (TLS end to end with the leader), the Go SDK over
// WebSockets on the HTTP and the HTTPS port, and REST over HTTP and
// HTTPS — and each reaches the leader's broker: what is sent through the
// follower is received through it. The follower's own count of piped
// connections shows that each front went through its proxy, not to a
// broker of its own.
func TestClusterProxiesEveryFront(t *testing.T) {
	// One local CA for the three nodes (--tls-dir shared), made before
	// they start, so a client trusts whichever node leads.
	tlsDir := t.TempDir()
	files, err := httpgw.LoadOrCreateCertificates(tlsDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CAPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", files.CAPath)
	}
	nodes := startTestClusterWith(t, func(o *Options) {
		o.AMQPSAddr, o.HTTPSAddr, o.TLSDir = "127.0.0.1:0", "127.0.0.1:0", tlsDir
	})
	waitLeader(t, nodes)
	// follower is a node that proxies now: it knows a leader other than
	// itself and serves nothing (picked again for each front, in case
	// leadership moved under load).
	follower := func(t *testing.T) *Cluster {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			for id, c := range nodes {
				if l := c.Node().Leader(); l != 0 && l != id && !c.Serving() && nodes[l].Serving() {
					return c
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no node followed a serving leader within a minute")
		return nil
	}
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer httpc.CloseIdleConnections()

	t.Run("amqps", func(t *testing.T) {
		f := follower(t)
		client, err := azservicebus.NewClientFromConnectionString(f.TLSConnectionString(), &azservicebus.ClientOptions{
			TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(context.Background())
		sdkRoundTrip(t, client, "over AMQPS through a follower")
	})
	for _, c := range []struct {
		name  string
		front string
		plain bool
	}{{"wss", "https", false}, {"ws", "http", true}} {
		t.Run(c.name, func(t *testing.T) {
			port := portOf(follower(t).addr(c.front))
			cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"
			client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
				NewWebSocketConn: newWebSocketConn(httpc, c.plain)})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close(context.Background())
			sdkRoundTrip(t, client, "over WebSockets ("+c.name+") through a follower")
		})
	}
	for _, c := range []struct{ name, scheme string }{{"http", "http"}, {"https", "https"}} {
		t.Run("rest-"+c.name, func(t *testing.T) {
			base := c.scheme + "://localhost:" + portOf(follower(t).addr(c.name))
			body := "over REST (" + c.name + ") through a follower"
			if code, _ := restCall(t, httpc, http.MethodPost, base+"/orders/messages", body); code != http.StatusCreated {
				t.Fatalf("send: %d, want 201", code)
			}
			code, got := restCall(t, httpc, http.MethodDelete, base+"/orders/messages/head?timeout=10", "")
			if code != http.StatusOK || got != body {
				t.Fatalf("receive and delete: %d %q, want 200 %q", code, got, body)
			}
		})
	}

	for _, front := range []string{"amqps", "http", "https"} {
		var n int64
		for _, c := range nodes {
			n += c.proxy.proxied(front)
		}
		if n == 0 {
			t.Errorf("no follower piped a %s connection to the leader", front)
		}
	}
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

// restCall makes one REST request with a namespace-wide token and returns
// the status and body.
func restCall(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sas.Sign("https://localhost/", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}
