package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// startTLSApp starts an in-memory omnibus with every listener on a
// loopback port and its TLS files in a temporary directory; it returns
// the app, the pool of roots a client trusting its CA has, and the debug
// log.
func startTLSApp(t *testing.T, edit func(*Options)) (*App, *x509.CertPool, *observer.ObservedLogs) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	o := Options{Memory: true, ConfigPath: cfg, AMQPAddr: "127.0.0.1:0", AMQPSAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", TLSDir: t.TempDir(), Logger: zap.New(core)}
	if edit != nil {
		edit(&o)
	}
	a, err := Start(o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	caPEM, err := os.ReadFile(a.CAPath)
	if err != nil {
		t.Fatalf("reading the CA the app names (%q): %v", a.CAPath, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", a.CAPath)
	}
	return a, roots, logs
}

// sdkRoundTrip sends a message through client and receives and
// completes it.
func sdkRoundTrip(t *testing.T, client *azservicebus.Client, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatalf("NewMessageBatch: %v", err)
	}
	if err := batch.AddMessage(&azservicebus.Message{Body: []byte(body)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	r, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ReceiveMessages: %d messages, %v", len(msgs), err)
	}
	if string(msgs[0].Body) != body {
		t.Errorf("received %q, want %q", msgs[0].Body, body)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

// TestAMQPSOrdinaryConnectionString: the Go SDK reaches omnibus with a
// cloud-style connection string (no UseDevelopmentEmulator: AMQPS) once
// it trusts the local CA, and does not without.
func TestAMQPSOrdinaryConnectionString(t *testing.T) {
	a, roots, _ := startTLSApp(t, nil)
	cs := a.TLSConnectionString()
	_, port, _ := net.SplitHostPort(a.AMQPSAddr().String())
	if want := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"; cs != want {
		t.Fatalf("TLS connection string %q, want %q", cs, want)
	}
	// On a port other than 5671 the Go SDK gives go-amqp "host:port" as
	// the TLS server name, so the client names the host itself.
	client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sdkRoundTrip(t, client, "over TLS")

	// A client that does not trust the CA fails on the certificate.
	untrusting, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		TLSConfig: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}, RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := untrusting.NewSender("orders", nil)
	if err == nil {
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(err, &unknownCA) && (err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority")) {
		t.Errorf("send without trusting the CA: %v, want an unknown-authority error", err)
	}
}

// TestAMQPSBadHandshakes: a TLS handshake that fails, or never comes,
// closes only that connection, is logged at debug level, and leaves no
// goroutine behind; a good client is served meanwhile.
func TestAMQPSBadHandshakes(t *testing.T) {
	a, roots, logs := startTLSApp(t, func(o *Options) { o.AuthTimeout = badInputAuthTimeout })
	addr := a.AMQPSAddr().String()
	baseline := coretest.Goroutines()

	// 4 first: a socket that never starts the handshake, closed by the
	// AMQP handshake deadline (AuthTimeout here) while the rest runs.
	silent := dialRaw(t, addr)

	// 1. Plain AMQP spoken to the TLS port.
	nc := dialRaw(t, addr)
	if _, err := nc.Write([]byte("AMQP\x03\x01\x00\x00")); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc, "plain AMQP header on the AMQPS port")

	// 2. A client that does not trust the certificate: its handshake
	// fails (and it tells the server with an alert).
	tc := tls.Client(dialRaw(t, addr), &tls.Config{ServerName: "localhost", RootCAs: x509.NewCertPool()})
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake with an untrusted certificate succeeded")
	}
	tc.Close()

	// 3. TLS 1.0 and 1.1: each refused by the server with a
	// protocol-version alert.
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		expectOldTLSRefused(t, addr, roots, v)
	}

	// A good client meanwhile.
	client, err := azservicebus.NewClientFromConnectionString(a.TLSConnectionString(), &azservicebus.ClientOptions{
		TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	sdkRoundTrip(t, client, "still served")
	client.Close(context.Background())

	// 4. The silent socket.
	expectClosed(t, silent, "silent socket on the AMQPS port")

	coretest.WaitGoroutines(t, baseline)
	if n := logs.FilterMessage("handshake failed").FilterLevelExact(zapcore.DebugLevel).Len(); n < 3 {
		t.Errorf("%d handshake failures logged at debug level, want at least 3:\n%v", n, logs.All())
	}
}

// expectOldTLSRefused offers only TLS version v (below 1.2) to addr and
// checks the server refuses it with a protocol-version alert. Go's client
// offers nothing below TLS 1.2 unless MinVersion says so: with MaxVersion
// alone it would fail on its own, before the server had a say.
func expectOldTLSRefused(t *testing.T, addr string, roots *x509.CertPool, v uint16) {
	t.Helper()
	name := tls.VersionName(v)
	c := tls.Client(dialRaw(t, addr), &tls.Config{ServerName: "localhost", RootCAs: roots, MinVersion: v, MaxVersion: v})
	defer c.Close()
	err := c.Handshake()
	if err == nil {
		t.Fatalf("a %s-only client completed its handshake (%s negotiated): the server accepts %s",
			name, tls.VersionName(c.ConnectionState().Version), name)
	}
	// The alert comes from the server ("remote error"), not from the
	// client refusing its own configuration.
	if !strings.Contains(err.Error(), "remote error: tls: protocol version not supported") {
		t.Fatalf("a %s-only handshake: %v, want the server's protocol-version alert", name, err)
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// badInputAuthTimeout is the AuthTimeout of the tests that wait for it to
// close a silent socket. A good client in the same test must log in within
// it too (TLS, SASL, open and its $cbs token), which under -race on a
// loaded machine took more than a second.
const badInputAuthTimeout = 5 * time.Second

// expectClosed waits (up to 30 s) for the server to close nc.
func expectClosed(t *testing.T, nc net.Conn, what string) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: still open after 30 s", what)
	}
	nc.Close()
}

// BenchmarkAMQPSHandshake measures what a new AMQPS connection costs on
// loopback before AMQP starts: the TCP connect and the TLS handshake
// (ECDSA P-256 certificate of the local CA, TLS 1.3).
func BenchmarkAMQPSHandshake(b *testing.B) {
	a, roots := benchTLSApp(b)
	conf := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	b.ResetTimer()
	for b.Loop() {
		c, err := tls.Dial("tcp", a.AMQPSAddr().String(), conf)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkAMQPSConnect measures a whole new connection over AMQPS:
// TCP, TLS, SASL PLAIN and the exchange of open frames (go-amqp).
func BenchmarkAMQPSConnect(b *testing.B) {
	a, roots := benchTLSApp(b)
	opts := &amqp.ConnOptions{TLSConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"},
		SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey)}
	b.ResetTimer()
	for b.Loop() {
		c, err := amqp.Dial(b.Context(), "amqps://"+a.AMQPSAddr().String(), opts)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func benchTLSApp(b *testing.B) (*App, *x509.CertPool) {
	b.Helper()
	a, err := Start(Options{Memory: true, AMQPAddr: "-", AMQPSAddr: "127.0.0.1:0", HTTPAddr: "-", HTTPSAddr: "-", TLSDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Shutdown(context.Background()) })
	pem, err := os.ReadFile(a.CAPath)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return a, roots
}
