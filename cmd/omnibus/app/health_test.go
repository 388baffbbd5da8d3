package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// healthBody is GET /health's answer.
type healthBody struct {
	Status     string `json:"status"`
	Components []struct {
		Name, Status, Reason string
	} `json:"components"`
}

// component returns the status and reason of one component.
func (h healthBody) component(name string) (status, reason string) {
	for _, c := range h.Components {
		if c.Name == name {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// keepAlive is one HTTP/1.1 connection kept open, to ask /health even
// when no new connection can be made.
type keepAlive struct {
	c  net.Conn
	br *bufio.Reader
}

func dialKeepAlive(t *testing.T, addr string) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{c: c, br: bufio.NewReader(c)}
}

// health asks GET /health on the kept connection.
func (k *keepAlive) health(t *testing.T) (int, healthBody) {
	t.Helper()
	_ = k.c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(k.c, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatalf("health: %v", err)
	}
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	defer resp.Body.Close()
	var h healthBody
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("health body: %v", err)
	}
	return resp.StatusCode, h
}

// waitHealth asks /health until cond holds, failing after a deadline.
func (k *keepAlive) waitHealth(t *testing.T, what string, cond func(int, healthBody) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, h := k.health(t)
		if cond(status, h) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /health still %d %+v", what, status, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHealthListsEveryListenerAndTheStore: /health names each listener
// and the store, all healthy. (fd_linux_test.go makes them fail.)
func TestHealthListsEveryListenerAndTheStore(t *testing.T) {
	a, err := Start(Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "127.0.0.1:0", AMQPSAddr: "127.0.0.1:0", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	k := dialKeepAlive(t, a.HTTPAddr().String())
	status, h := k.health(t)
	if status != http.StatusOK || h.Status != "healthy" {
		t.Fatalf("health %d %+v", status, h)
	}
	var names []string
	for _, c := range h.Components {
		names = append(names, c.Name)
		if c.Status != "healthy" || c.Reason != "" {
			t.Errorf("component %+v", c)
		}
	}
	if fmt.Sprint(names) != "[amqp http https store]" {
		t.Errorf("components %v", names)
	}
}
