package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"go.uber.org/zap/zaptest"
)

func TestProtectedModeAdmitsOnlyLoopback(t *testing.T) {
	cases := []struct {
		addr     string
		loopback bool
	}{
		{"127.0.0.1:5672", true},
		{"127.9.8.7:5672", true},
		{"[::1]:5672", true},
		{"[::ffff:127.0.0.1]:5672", true},
		{"192.0.2.2:5672", false},
		{"[::ffff:192.0.2.2]:5672", false},
		{"[fd00::2]:5672", false},
		{"[fe80::1%eth0]:5672", false},
		{"0.0.0.0:5672", false},
		{"[::]:5672", false},
	}
	protected := newProtection(Options{Key: DefaultKey, Logger: zaptest.NewLogger(t)})
	for _, o := range []Options{{Key: "a key of my own"}, {Key: DefaultKey, AllowRemote: true}} {
		o.Logger = zaptest.NewLogger(t)
		if open := newProtection(o); open.on {
			t.Errorf("protected mode on with %+v", o)
		}
	}
	for _, c := range cases {
		addr := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.addr))
		err := protected.admit(addr)
		if (err == nil) != c.loopback {
			t.Errorf("admit(%s) = %v, want loopback=%v", c.addr, err, c.loopback)
		}
		if err != nil {
			for _, want := range []string{"protected mode", "--allow-remote", "OMNIBUS_ALLOW_REMOTE=true", "OMNIBUS_KEY", addr.AddrPort().Addr().Unmap().String()} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal of %s does not say %q: %v", c.addr, want, err)
				}
			}
		}
	}
	if err := protected.admit(nil); err == nil {
		t.Error("a peer without an address was admitted")
	}
}

// nonLoopbackIP returns an address of this machine that is not loopback,
// so a test can connect from it.
func nonLoopbackIP(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ip, _ := netip.AddrFromSlice(n.IP)
			if ip = ip.Unmap(); ip.Is4() && !ip.IsLoopback() {
				return ip
			}
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to connect from, so protected mode cannot be seen refusing one")
	return netip.Addr{}
}

// TestProtectedModeOverRealSockets: with the default key, clients that
// connect over loopback are served on both fronts and clients that
// connect from another address are refused (HTTP with a 403 saying why
// and how to open it); a key of one's own or AllowRemote opens both.
func TestProtectedModeOverRealSockets(t *testing.T) {
	remote := nonLoopbackIP(t)
	for _, c := range []struct {
		name  string
		opts  Options
		serve bool // remote clients are served
	}{
		{"default key", Options{}, false},
		{"own key", Options{Key: "not-the-emulator-key"}, true},
		{"allow remote", Options{AllowRemote: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Memory, o.AMQPAddr, o.HTTPAddr, o.HTTPSAddr, o.AMQPSAddr, o.Logger = true, ":0", ":0", "-", "-", zaptest.NewLogger(t)
			a, err := Start(o)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Shutdown(context.Background())
			_, amqpPort, _ := net.SplitHostPort(a.AMQPAddr().String())
			_, httpPort, _ := net.SplitHostPort(a.HTTPAddr().String())
			key := o.Key
			if key == "" {
				key = DefaultKey
			}
			hosts := []string{"127.0.0.1", remote.String()}
			if hasIPv6Loopback() {
				hosts = append(hosts, "::1")
			}
			for _, host := range hosts {
				local := host != remote.String()
				status, body := getHealth(t, net.JoinHostPort(host, httpPort))
				amqpErr := dialAMQP(t, net.JoinHostPort(host, amqpPort), key)
				if local || c.serve {
					if status != http.StatusOK || amqpErr != nil {
						t.Errorf("%s: HTTP %d %s; AMQP %v: want both served", host, status, body, amqpErr)
					}
					continue
				}
				if status != http.StatusForbidden || !strings.Contains(body, "protected mode") ||
					!strings.Contains(body, "--allow-remote") || !strings.Contains(body, remote.String()) {
					t.Errorf("%s: HTTP %d %s: want 403 explaining protected mode", host, status, body)
				}
				if amqpErr == nil || !strings.Contains(amqpErr.Error(), "protected mode") ||
					!strings.Contains(amqpErr.Error(), "unauthorized-access") {
					t.Errorf("%s: AMQP %v: want unauthorized-access explaining protected mode", host, amqpErr)
				}
			}
		})
	}
}

func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// getHealth does GET /health on a new connection.
func getHealth(t *testing.T, hostPort string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + hostPort + "/health")
	if err != nil {
		t.Fatalf("GET /health on %s: %v", hostPort, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// dialAMQP opens and closes an AMQP connection with SASL PLAIN.
func dialAMQP(t *testing.T, hostPort, key string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	conn, err := amqp.Dial(ctx, "amqp://"+hostPort, &amqp.ConnOptions{
		SASLType: amqp.SASLTypePlain(DefaultKeyName, key), HostName: "localhost"})
	if err != nil {
		return err
	}
	return conn.Close()
}
