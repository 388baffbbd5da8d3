package httpgw

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/loglimit"
	"github.com/omnibusmq/omnibus/core/loglimit/loglimittest"
	"github.com/omnibusmq/omnibus/storage"
)

// A failing disk makes every send a 503 that the gateway logs as a
// failure; clients that keep sending (the SDKs retry server-busy) cannot
// make that more than the log limiter's bound: under 1 MB a minute.
func TestFailingRequestsLogBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("sends for 2 s")
	}
	env, fs := coretest.NewFault(t)
	sink := &loglimittest.Sink{}
	log := loglimittest.Logger(sink, "http")
	lim := loglimit.New(loglimit.Config{})
	gw, err := New(Config{Broker: env.Broker, Logger: log, LogLimiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{Env: env, gw: gw}
	e.mustQueue(t, "q")
	srv := newE2EServer(t, e)
	fs.FailApplies(0, -1, fmt.Errorf("test disk: %w", storage.ErrNoSpace))

	var sent atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 4 {
		wg.Go(func() {
			client := srv.Client()
			for time.Since(start) < 2*time.Second {
				resp, err := client.Do(signedRequest(t, "POST", srv.URL+"/q/messages", "payload"))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("send on a full disk: %s, want 503", resp.Status)
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	budget := loglimittest.FloodBudget(elapsed)
	t.Logf("%v: %d refused sends, %d log lines, %d bytes (budget %d), held back %v",
		elapsed.Round(time.Millisecond), sent.Load(), sink.Lines.Load(), sink.Bytes.Load(), budget, lim.Suppressed())
	if sent.Load() < 500 {
		t.Fatalf("only %d sends: too few to tell", sent.Load())
	}
	if got := sink.Bytes.Load(); got > budget {
		t.Errorf("%d refused sends wrote %d bytes of log, more than the %d that make 1 MB a minute", sent.Load(), got, budget)
	}
	if lim.Suppressed()["request failed"] == 0 {
		t.Error(`no "request failed" lines held back`)
	}
}
