package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/coder/websocket"
)

// tlsClientEnv, when set, makes this test binary an SDK client of the
// connection string it holds (see TestMain): a process of its own, so
// that SSL_CERT_FILE decides which roots it trusts, as it does for a
// user's program.
const tlsClientEnv = "OMNIBUS_TEST_TLS_CLIENT"

// tlsClientWebSocketEnv, set too, makes that client use AMQP over
// WebSockets with the dialer README.md in this directory gives.
const tlsClientWebSocketEnv = "OMNIBUS_TEST_TLS_CLIENT_WEBSOCKET"

func TestMain(m *testing.M) {
	if cs := os.Getenv(tlsClientEnv); cs != "" {
		if err := tlsClient(cs, os.Getenv(tlsClientWebSocketEnv) != ""); err != nil {
			fmt.Fprintln(os.Stderr, "tls client:", err)
			os.Exit(1)
		}
		fmt.Println("round trip over TLS: ok")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tlsClient sends a message to queue q with the Go SDK's defaults (the
// system's roots) and receives and completes it; over AMQP over
// WebSockets with README.md's dialer when webSocket is set.
func tlsClient(cs string, webSocket bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 100 * time.Millisecond}}
	if webSocket {
		opts.NewWebSocketConn = readmeWebSocketConn
	}
	c, err := azservicebus.NewClientFromConnectionString(cs, opts)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	s, err := c.NewSender("q", nil)
	if err != nil {
		return err
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("trusted")}, nil); err != nil {
		return err
	}
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		return err
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		return err
	}
	if len(msgs) != 1 || string(msgs[0].Body) != "trusted" {
		return fmt.Errorf("received %d messages", len(msgs))
	}
	return r.CompleteMessage(ctx, msgs[0], nil)
}

// readmeWebSocketConn is README.md's NewWebSocketConn for the Go SDK.
func readmeWebSocketConn(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
	ws, _, err := websocket.Dial(ctx, args.Host, &websocket.DialOptions{Subprotocols: []string{"amqp"}})
	if err != nil {
		return nil, err
	}
	return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
}

var tlsReadyRE = regexp.MustCompile(`connect over TLS with.*"connectionString": "([^"]+)", "trust": "([^"]+)"`)

// TestAMQPSTrustedThroughSSLCertFile runs README.md's recipe: `omnibus
// cert` creates the local CA before the broker first starts, the broker
// serves AMQPS on 5671 with a certificate of that CA and logs the
// ordinary connection string, and a Go program given only that string
// and SSL_CERT_FILE=<the CA> sends and receives, over AMQPS and, with
// README.md's WebSocket dialer and the HTTPS port in the string, over
// wss://. Without the CA both fail on the certificate. The broker listens
// on a random 127.x.y.z address, since the SDK dials 5671 whenever the
// endpoint names no port.
func TestAMQPSTrustedThroughSSLCertFile(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(killConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	ip := freeLoopbackFor(t, 5671)

	caPath := runCmd(t, bin, "cert", "--data", data, "--tls-hosts", ip)
	pemOut := runCmd(t, bin, "cert", "--data", data, "--tls-hosts", ip, "--pem")
	if onDisk, err := os.ReadFile(caPath); err != nil || !bytes.Equal(bytes.TrimSpace(onDisk), []byte(pemOut)) {
		t.Fatalf("omnibus cert printed %q; --pem does not print that file (%v)", caPath, err)
	}

	p := startBinary(t, bin, nil, "--data", data, "--config", cfg, "--amqp-addr", "127.0.0.1:0",
		"--amqps-addr", ip+":5671", "--tls-hosts", ip, "--http-addr", "-", "--https-addr", "127.0.0.1:0")
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; {
		if m = tlsReadyRE.FindStringSubmatch(p.logs.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("no TLS connection string logged:\n%s", p.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs, trust := m[1], m[2]
	if want := "Endpoint=sb://localhost/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"; cs != want {
		t.Errorf("logged TLS connection string %q, want %q", cs, want)
	}
	if trust != caPath {
		t.Errorf("the broker says to trust %s, omnibus cert made %s", trust, caPath)
	}
	cs = strings.Replace(cs, "localhost", ip, 1) // where this broker listens

	out, err := runClient(cs, "SSL_CERT_FILE="+caPath)
	if err != nil || !strings.Contains(out, "round trip over TLS: ok") {
		t.Fatalf("client with SSL_CERT_FILE=%s: %v\n%s", caPath, err, out)
	}
	empty := filepath.Join(dir, "no-roots.pem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runClient(cs, "SSL_CERT_FILE="+empty)
	if err == nil || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Fatalf("client trusting nothing: %v, want a certificate error\n%s", err, out)
	}

	m = httpsAddrRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no HTTPS address in the ready line:\n%s", p.logs)
	}
	_, port, _ := net.SplitHostPort(m[1])
	wsCS := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"
	out, err = runClient(wsCS, "SSL_CERT_FILE="+caPath, tlsClientWebSocketEnv+"=1")
	if err != nil || !strings.Contains(out, "round trip over TLS: ok") {
		t.Fatalf("WebSocket client with SSL_CERT_FILE=%s: %v\n%s", caPath, err, out)
	}
	out, err = runClient(wsCS, "SSL_CERT_FILE="+empty, tlsClientWebSocketEnv+"=1")
	if err == nil || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Fatalf("WebSocket client trusting nothing: %v, want a certificate error\n%s", err, out)
	}
}

var httpsAddrRE = regexp.MustCompile(`omnibus is ready.*"https": "([^"]+)"`)

// runCmd runs the binary and returns its standard output, trimmed.
func runCmd(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("omnibus %v: %v\n%s", args, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// runClient runs this test binary as a TLS client of cs with env added.
func runClient(cs string, env ...string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), tlsClientEnv+"="+cs), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// freeLoopbackFor returns a random 127.x.y.z address whose port is free
// now, for a listener that must have that port (the SDKs' default).
func freeLoopbackFor(t *testing.T, port int) string {
	t.Helper()
	for range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(256), 1+rand.IntN(250))
		l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				t.Fatalf("listening on port %d: %v", port, err)
			}
			continue
		}
		l.Close()
		return ip
	}
	t.Fatalf("no free 127.x.y.z address for port %d", port)
	return ""
}
