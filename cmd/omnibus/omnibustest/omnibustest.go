// Package omnibustest starts an omnibus broker inside a Go test, as
// net/http/httptest starts an HTTP server: in memory, on ephemeral
// loopback ports, with the entities the test names, stopped when the test
// ends. The official SDKs connect to it with [Broker.ConnectionString].
//
//	func TestOrders(t *testing.T) {
//		b := omnibustest.Start(t, omnibustest.Queue("orders"), omnibustest.Topic("events", "audit"))
//		client, err := azservicebus.NewClientFromConnectionString(b.ConnectionString, nil)
//		...
//	}
//
// Nothing is written to disk and no other process is started; each Start
// is a broker of its own, so parallel tests do not see each other's
// messages.
package omnibustest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/core"
)

// Broker is a running omnibus, stopped by the test's cleanup.
type Broker struct {
	// ConnectionString is the emulator's form, with the AMQP port:
	// Endpoint=sb://127.0.0.1:PORT;…;UseDevelopmentEmulator=true;
	ConnectionString string
	// HTTPURL is the base URL of the REST API and ATOM management over
	// plain HTTP (http://127.0.0.1:PORT).
	HTTPURL string
	// AdminConnectionString is for the SDKs' administration clients,
	// which speak HTTPS only: Endpoint=sb://127.0.0.1:HTTPSPORT/;…, used
	// with [Broker.HTTPClient] as their transport.
	AdminConnectionString string
	// HTTPClient trusts the broker's own CA (made for this broker in the
	// test's temporary directory); pass it as the administration client's
	// transport (azcore.ClientOptions.Transport).
	HTTPClient *http.Client
	// KeyName and Key are the namespace's shared access key.
	KeyName, Key string
	// Core is the broker's core, for what a test needs beyond a client
	// (creating entities with every property, reading counts).
	Core *core.Broker

	app *app.App
}

// Option configures [Start].
type Option func(*settings)

type settings struct {
	entities []core.Entity
	logLevel zap.AtomicLevel
	tls      bool
}

// Queue creates a queue with Service Bus's default properties.
func Queue(name string) Option {
	return Entity(core.Entity{Kind: core.KindQueue, Name: name})
}

// SessionQueue creates a queue that requires sessions.
func SessionQueue(name string) Option {
	return Entity(core.Entity{Kind: core.KindQueue, Name: name, RequiresSession: true})
}

// Topic creates a topic and, for each name given, a subscription that
// takes every message (the $Default rule).
func Topic(name string, subscriptions ...string) Option {
	return func(s *settings) {
		s.entities = append(s.entities, core.Entity{Kind: core.KindTopic, Name: name})
		for _, sub := range subscriptions {
			s.entities = append(s.entities, core.Entity{Kind: core.KindSubscription, Topic: name, Name: sub})
		}
	}
}

// Entity creates an entity with every property as given: a queue, a
// topic, or a subscription (with Topic set, and its Rules); entities are
// created in the order of the options.
func Entity(e core.Entity) Option {
	return func(s *settings) { s.entities = append(s.entities, e) }
}

// Logs sends the broker's log at level and above to the test's log
// (default: warnings and errors only).
func Logs(level zap.AtomicLevel) Option {
	return func(s *settings) { s.logLevel = level }
}

// Start starts a broker for the test and stops it when the test and its
// subtests end. It fails the test if the broker cannot start or an entity
// cannot be created.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	s := settings{logLevel: zap.NewAtomicLevelAt(zap.WarnLevel)}
	for _, o := range opts {
		o(&s)
	}
	a, err := app.Start(app.Options{
		Memory:      true,
		AMQPAddr:    "127.0.0.1:0",
		HTTPAddr:    "127.0.0.1:0",
		AMQPSAddr:   "-",
		HTTPSAddr:   "127.0.0.1:0",
		TLSDir:      t.TempDir(),
		MetricsAddr: "-",
		Logger:      zaptest.NewLogger(t, zaptest.Level(s.logLevel)),
	})
	if err != nil {
		t.Fatalf("omnibustest: starting omnibus: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("omnibustest: stopping omnibus: %v", err)
		}
	})
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(a.CAPath)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("omnibustest: reading the broker's CA %s: %v", a.CAPath, err)
	}
	b := &Broker{
		ConnectionString: fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true;",
			a.AMQPAddr(), app.DefaultKeyName, app.DefaultKey),
		HTTPURL: "http://" + a.HTTPAddr().String(),
		AdminConnectionString: fmt.Sprintf("Endpoint=sb://%s/;SharedAccessKeyName=%s;SharedAccessKey=%s",
			a.HTTPSAddr(), app.DefaultKeyName, app.DefaultKey),
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		KeyName:    app.DefaultKeyName,
		Key:        app.DefaultKey,
		Core:       a.Broker,
		app:        a,
	}
	for _, e := range s.entities {
		b.Create(t, e)
	}
	return b
}

// Create creates an entity while the test runs, failing the test if it
// cannot be created.
func (b *Broker) Create(t testing.TB, e core.Entity) {
	t.Helper()
	if _, err := b.Core.CreateEntity(context.Background(), e); err != nil {
		t.Fatalf("omnibustest: creating %s %q: %v", e.Kind, e.Path(), err)
	}
}
