package app

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// holdMetricsConns opens n connections to addr that each had one scrape
// answered and now idle as keep-alives, and half more that sent half a
// request's headers; all are closed when the test ends.
func holdMetricsConns(t *testing.T, addr string, idle, halfSent int) {
	t.Helper()
	hold := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Half-sent first: with the old listener they took slots too.
	for range halfSent {
		c := hold()
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: "); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, idle)
	for range idle {
		c := hold()
		go func() {
			// Each is answered when a slot is free; on a starved listener
			// most never are, which is what the scrape below must survive.
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
				done <- err
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			_ = c.SetDeadline(time.Time{})
			done <- err
		}()
	}
	for range idle {
		<-done
	}
}

// TestMetricsAnswerUnderIdleConnections: 100 idle keep-alives and 20
// connections that sent half their headers, held open, do not keep a
// scrape out: it is answered at once (the listener used to make it wait
// for a slot as long as they stayed, 15 s and more).
func TestMetricsAnswerUnderIdleConnections(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := startWebApp(t, Options{Logger: zap.New(core)})
	addr := a.MetricsAddr().String()
	holdMetricsConns(t, addr, 100, 20)
	// A connection evicted after its request was read is not answered:
	// writing to it would only log failures, one per metric family.
	if lines := logs.FilterLoggerName("metrics"); lines.Len() > 0 {
		t.Errorf("holding connections logged %d lines, the first: %s", lines.Len(), lines.All()[0].Message)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Get("http://" + addr + "/metrics")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("scrape with 100 idle and 20 half-sent connections held: %v after %v", err, took.Round(time.Millisecond))
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		t.Fatalf("scrape: %d, %d bytes", resp.StatusCode, len(b))
	}
	t.Logf("scrape with 100 idle and 20 half-sent connections held: %v", took.Round(time.Microsecond))
}

// TestEvictionSparesAnswers: at the bound a connection being answered is
// never evicted (the new one is refused instead); one evicted after its
// request was read but before its handler began is not answered.
func TestEvictionSparesAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	el := newEvictingListener(l, 1)
	conn := func() net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a
	}
	request := func(c *evictableConn) *http.Request {
		r, _ := http.NewRequestWithContext(el.connContext(t.Context(), c), "GET", "/metrics", nil)
		return r
	}
	first, _ := el.admit(conn())
	second, victim := el.admit(conn())
	if victim != first || second == nil {
		t.Fatalf("at the bound: victim %p, want the first connection %p", victim, first)
	}
	answered := false
	el.serving(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { answered = true })).ServeHTTP(nil, request(first))
	if answered {
		t.Error("a request of an evicted connection was answered")
	}
	el.serving(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		answered = true
		if c, v := el.admit(conn()); c != nil || v != nil {
			t.Error("a connection being answered was evicted")
		}
	})).ServeHTTP(nil, request(second))
	if !answered {
		t.Fatal("the request of a connection in place was not answered")
	}
	el.connState(second, http.StateIdle)
	if _, v := el.admit(conn()); v != second {
		t.Errorf("an idle connection was not evicted at the bound: %p", v)
	}
	if n := el.open(); n != 1 {
		t.Errorf("%d connections held, want 1", n)
	}
}
