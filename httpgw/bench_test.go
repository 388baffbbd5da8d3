package httpgw

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

// benchClients is the number of concurrent REST clients.
const benchClients = 32

func benchSetup(b *testing.B) (*testEnv, string, *http.Client, string) {
	e := newTestEnv(b)
	gw, err := New(Config{Broker: e.Broker})
	if err != nil {
		b.Fatal(err)
	}
	e.gw = gw
	e.mustQueue(b, "bench")
	srv := newE2EServer(b, e)
	tr := &http.Transport{MaxIdleConns: 2 * benchClients, MaxIdleConnsPerHost: 2 * benchClients}
	b.Cleanup(tr.CloseIdleConnections)
	tok := sas.Sign(srv.URL+"/bench", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour))
	return e, srv.URL, &http.Client{Transport: tr}, tok
}

func benchDo(b *testing.B, c *http.Client, method, url, tok string, want int) *http.Response {
	req, err := http.NewRequest(method, url, strings.NewReader("benchmark message body"))
	if err != nil {
		b.Error(err)
		return nil
	}
	req.Header.Set("Authorization", tok)
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return resp
}

// BenchmarkRESTSend sends over loopback HTTP with 32 concurrent clients.
func BenchmarkRESTSend(b *testing.B) {
	_, base, c, tok := benchSetup(b)
	b.SetParallelism((benchClients + 1) / 2) // × GOMAXPROCS (2 here) goroutines
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchDo(b, c, "POST", base+"/bench/messages", tok, http.StatusCreated)
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkRESTPeekLockComplete peek-locks and completes over loopback
// HTTP with 32 concurrent clients; messages are preloaded through the core.
func BenchmarkRESTPeekLockComplete(b *testing.B) {
	e, base, c, tok := benchSetup(b)
	for i := 0; i < b.N; i++ {
		e.MustSend(b, "bench", coretest.Text("m"))
	}
	b.SetParallelism((benchClients + 1) / 2)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp := benchDo(b, c, "POST", base+"/bench/messages/head?timeout=5", tok, http.StatusCreated)
			if resp == nil {
				return
			}
			benchDo(b, c, "DELETE", resp.Header.Get("Location"), tok, http.StatusOK)
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}
