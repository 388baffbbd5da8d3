package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/membudget/membudgettest"
	"github.com/omnibusmq/omnibus/httpgw"
)

// newBudgetEnv is newEnv with a memory budget of limit bytes, and a queue
// "big" holding n messages of size bytes each (message i's body is byte i
// repeated).
func newBudgetEnv(t *testing.T, limit int64, n, size int) (*env, *membudget.Budget) {
	t.Helper()
	mem := membudget.New(limit)
	e := newEnvWith(t, func(c *httpgw.Config) { c.Memory = mem })
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "big", MaxMessageSizeInKilobytes: 4096})
	for i := range n {
		e.MustSend(t, "big", &core.Message{Body: bytes.Repeat([]byte{byte(i + 1)}, size)})
	}
	return e, mem
}

// A page of big bodies stops at maxPeekBytes (4 MiB) past its first
// message and says where to go on; the bodies arrive whole.
func TestPeekPageBoundedInBytes(t *testing.T) {
	const size = 1536 << 10
	e, mem := newBudgetEnv(t, 0, 5, size)
	var pages []string
	for from := int64(1); from != 0; {
		var p peekAnswer
		e.apiCall(t, "GET", fmt.Sprintf("messages?path=big&max=50&from=%d", from), "", &p)
		for _, m := range p.Messages {
			if !bytes.Equal(m.Body, bytes.Repeat([]byte{byte(m.SequenceNumber)}, size)) {
				t.Fatalf("message %d: a body of %d bytes, not the one sent", m.SequenceNumber, len(m.Body))
			}
		}
		pages = append(pages, fmt.Sprint(seqs(p)))
		from = p.Next
	}
	if got := fmt.Sprint(pages); got != "[[1 2] [3 4] [5]]" {
		t.Fatalf("pages %s, want [[1 2] [3 4] [5]]: two 1.5 MiB messages in 4 MiB", got)
	}
	membudgettest.WaitUsed(t, mem, 0)
}

// With the budget used up, a peek is refused with 503 and Retry-After;
// once there is room it is served and gives back all it took.
func TestPeekRefusedPastTheMemoryBudget(t *testing.T) {
	const limit = 4 << 20
	e, mem := newBudgetEnv(t, limit, 2, 1<<20)
	mem.Acquire(limit - 1000) // others hold the budget
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/console/$api/messages?path=big", nil)
	req.Header.Set("Authorization", rootToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("peek on a full budget: %d (Retry-After %q) %.200s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if mem.Used() != limit-1000 || mem.Refused()["console-page"] != 1 {
		t.Fatalf("after the refusal: %d bytes held, refusals %v", mem.Used(), mem.Refused())
	}
	mem.Release(limit - 1000)
	var p peekAnswer
	e.apiCall(t, "GET", "messages?path=big", "", &p)
	if len(p.Messages) != 2 {
		t.Fatalf("with room: %d messages, want 2", len(p.Messages))
	}
	membudgettest.WaitUsed(t, mem, 0)
}

// Peeks of big bodies at once never hold more than the budget: each gets
// a page or a 503, and once they are answered the budget is back to zero.
func TestConcurrentPeeksStayWithinTheBudget(t *testing.T) {
	const limit, size = 5 << 20, 1536 << 10
	e, mem := newBudgetEnv(t, limit, 8, size)
	stopSampling := membudgettest.SamplePeak(t, mem)
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3 {
				status, body := e.call(t, "GET", "/console/$api/messages?path=big&max=50", rootToken(), "", nil)
				switch status {
				case http.StatusOK:
					var p peekAnswer
					if err := json.Unmarshal([]byte(body), &p); err != nil || len(p.Messages) == 0 {
						t.Errorf("a page of %d bytes: %v, %d messages", len(body), err, len(p.Messages))
					}
					served.Add(1)
				case http.StatusServiceUnavailable:
					refused.Add(1)
				default:
					t.Errorf("peek: %d %.200s", status, body)
				}
			}
		})
	}
	wg.Wait()
	peak := stopSampling()
	t.Logf("%d pages served, %d refused; at most %d bytes held", served.Load(), refused.Load(), peak)
	if peak > limit {
		t.Fatalf("the peeks held %d bytes, past the %d-byte budget", peak, limit)
	}
	if served.Load() == 0 {
		t.Fatal("no peek was served")
	}
	membudgettest.WaitUsed(t, mem, 0)
}
