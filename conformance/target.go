package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core/sas"
)

// Target is the endpoint under test.
type Target struct {
	// ConnectionString is a Service Bus connection string with a key:
	// Endpoint=sb://host[:port];SharedAccessKeyName=…;SharedAccessKey=…[;UseDevelopmentEmulator=true]
	ConnectionString string
	// Nodes are connection strings of the endpoint's other nodes (an
	// omnibus cluster), with the same key: each scenario sends through
	// one node and receives, settles and peeks through another
	// (nodes.go). Empty: everything goes to ConnectionString.
	Nodes []string
	// SecondConnectionString is a connection string of another namespace
	// of the same service, for the scenario that checks namespaces keep
	// their messages apart. Empty: against omnibus the scenario makes a
	// namespace with its namespaces API; elsewhere it is skipped.
	SecondConnectionString string
	// HTTP is the base URL of the REST runtime and ATOM management, e.g.
	// http://localhost:5300. Empty: management goes to https://<host>/ as
	// the SDKs do for a cloud namespace, and REST scenarios are skipped.
	HTTP string
	// InsecureTLS skips certificate verification on HTTPS, AMQPS and
	// WebSockets (self-signed).
	InsecureTLS bool
	// AMQPS is host:port of AMQP over TLS. Empty: for an ordinary
	// connection string (no UseDevelopmentEmulator) its host, on 5671 unless
	// it names a port; the TLS scenarios are skipped otherwise.
	AMQPS string
	// WebSocket is the URL of AMQP over WebSockets, such as
	// wss://host/$servicebus/websocket (ws:// for a plain listener). Empty:
	// for an ordinary connection string wss://<host>/$servicebus/websocket,
	// where Service Bus serves it; the WebSocket scenarios are skipped
	// otherwise.
	WebSocket string
	// CAFile is a PEM file of certificates trusted for AMQPS and
	// WebSockets besides the system's roots (omnibus's local CA).
	CAFile string
	// Predeclared uses the entities of conformance/Config.json, drained
	// before each use, instead of creating entities (for endpoints without
	// runtime management).
	Predeclared bool
	// CrossProtocolLocks says the endpoint shares lock tokens between AMQP
	// and REST (omnibus does; Service Bus does not). Scenarios that need it
	// are skipped otherwise.
	CrossProtocolLocks bool
	// MaxEntityBytes is the endpoint's cap on what one queue or topic
	// stores, below its MaxSizeInMegabytes (omnibus --max-entity-size).
	// The quota scenarios fill a queue, which at Service Bus's smallest
	// size (1 GB) takes too long: they are skipped unless this is set, to
	// at most [maxQuotaFill].
	MaxEntityBytes int64
	// TxnTimeout is how long the endpoint keeps a transaction open after
	// its first operation; zero means Service Bus's two minutes.
	TxnTimeout time.Duration
	// Crash, when set, kills the endpoint abruptly (SIGKILL) and brings
	// it back on the same addresses and data, returning once it accepts
	// connections again. Scenarios that need it (Scenario.Crashes) run
	// after all others, one at a time; without it they are skipped.
	Crash func(ctx context.Context) error

	recording bool // the no-network pass that notes the profiles scenarios use
	cs        sas.ConnectionString
	roots     *x509.CertPool // the system's and CAFile's, for AMQPS and WebSockets
	admin     *admin.Client
	httpc     *http.Client
	restBase  *url.URL
}

// txnTimeout is TxnTimeout or its default.
func (tg *Target) txnTimeout() time.Duration {
	if tg.TxnTimeout > 0 {
		return tg.TxnTimeout
	}
	return 2 * time.Minute
}

// open parses the connection string and creates the clients.
func (tg *Target) open() error {
	cs, err := sas.ParseConnectionString(tg.ConnectionString)
	if err != nil {
		return err
	}
	if cs.SharedAccessKey == "" {
		return fmt.Errorf("conformance: the connection string needs SharedAccessKeyName and SharedAccessKey")
	}
	tg.cs = cs
	if err := tg.openTransports(); err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: tg.InsecureTLS}, MaxIdleConnsPerHost: 16}
	tg.httpc = &http.Client{Transport: tr, Timeout: 90 * time.Second}
	opts := &admin.ClientOptions{}
	if tg.HTTP != "" {
		if tg.restBase, err = url.Parse(strings.TrimRight(tg.HTTP, "/")); err != nil {
			return fmt.Errorf("conformance: --http: %w", err)
		}
		opts.ClientOptions = azcore.ClientOptions{Transport: rebase{base: tg.restBase, c: tg.httpc}}
	}
	// The admin client rejects UseDevelopmentEmulator connection strings
	// in some versions; it only needs the endpoint and the key.
	adminCS := "Endpoint=sb://" + cs.Host + "/;SharedAccessKeyName=" + cs.SharedAccessKeyName + ";SharedAccessKey=" + cs.SharedAccessKey
	if tg.admin, err = admin.NewClientFromConnectionString(adminCS, opts); err != nil {
		return err
	}
	return nil
}

// rebase sends the admin client's https://<namespace>/… requests to the
// configured HTTP base URL, as emulator users do with a custom transport.
type rebase struct {
	base *url.URL
	c    *http.Client
}

func (r rebase) Do(req *http.Request) (*http.Response, error) {
	u := *req.URL
	u.Scheme, u.Host = r.base.Scheme, r.base.Host
	req.URL = &u
	req.Host = u.Host
	return r.c.Do(req)
}

var _ policy.Transporter = rebase{}

// AMQPHost returns host[:port] of the AMQP endpoint.
func (tg *Target) AMQPHost() string {
	h := tg.cs.Host
	if !strings.Contains(h, ":") {
		h += ":5672"
	}
	return h
}

// token returns a SAS token for a resource path on this namespace.
func (tg *Target) token(path string) string {
	resource := "http://" + tg.cs.Host + "/" + strings.TrimLeft(path, "/")
	return sas.Sign(resource, tg.cs.SharedAccessKeyName, tg.cs.SharedAccessKey, time.Now().Add(time.Hour))
}

// RESTResponse is a REST call's outcome with the body read.
type RESTResponse struct {
	*http.Response
	Body []byte
}

// REST performs an authorised request against the REST endpoint. path is
// relative to the namespace ("q1/messages/head?timeout=5").
func (t *T) REST(method, path string, body []byte, header http.Header) *RESTResponse {
	entity, _, _ := strings.Cut(path, "?")
	return t.RESTAuth(method, path, body, header, t.target.token(entity))
}

// RESTAuth is [T.REST] with the Authorization header given ("" sends none).
func (t *T) RESTAuth(method, path string, body []byte, header http.Header, auth string) *RESTResponse {
	t.live()
	tg := t.target
	if tg.restBase == nil {
		t.Skipf("no HTTP endpoint given (--http)")
	}
	u := tg.restBase.String() + "/" + strings.TrimLeft(path, "/")
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(t.ctx, method, u, rd)
	t.must(err, "building %s %s", method, path)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := tg.httpc.Do(req)
	t.must(err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	t.must(err, "reading %s %s", method, path)
	return &RESTResponse{Response: resp, Body: b}
}
