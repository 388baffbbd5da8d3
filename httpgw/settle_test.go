package httpgw

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// peekLock locks the next message over REST and returns the path part of
// its Location and its BrokerProperties.
func (e *testEnv) peekLock(t testing.TB, path string) (string, map[string]any) {
	t.Helper()
	w := e.do(t, request{method: "POST", target: "/" + path + "/messages/head?timeout=1"})
	if w.Code != http.StatusCreated {
		t.Fatalf("peek-lock %s: %d %s", path, w.Code, w.Body.String())
	}
	u, err := url.Parse(hget(w.Header(), "Location"))
	if err != nil {
		t.Fatal(err)
	}
	var bp map[string]any
	if err := json.Unmarshal([]byte(hget(w.Header(), "BrokerProperties")), &bp); err != nil {
		t.Fatal(err)
	}
	return u.Path, bp
}

func TestCompleteByLocation(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustSend(t, "q", coretest.Text("a"))
	loc, _ := e.peekLock(t, "q")
	w := e.do(t, request{method: "DELETE", target: loc})
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Fatalf("complete: %d %s", w.Code, w.Body.String())
	}
	if c, _ := e.Broker.Counts("q"); c.Total != 0 {
		t.Errorf("message not removed: %+v", c)
	}
	if w := e.do(t, request{method: "DELETE", target: loc}); w.Code != http.StatusNotFound {
		t.Errorf("second complete: %d, want 404", w.Code)
	}
}

func TestUnlockRaisesDeliveryCount(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustSend(t, "q", &core.Message{Body: []byte("a"), MessageID: "mid"})
	_, bp := e.peekLock(t, "q")
	// Unlock with the MessageId form of the URL (rest.md §1.7).
	w := e.do(t, request{method: "PUT", target: "/q/messages/mid/" + bp["LockToken"].(string)})
	if w.Code != http.StatusOK {
		t.Fatalf("unlock: %d %s", w.Code, w.Body.String())
	}
	_, again := e.peekLock(t, "q")
	if again["DeliveryCount"] != 2.0 {
		t.Errorf("DeliveryCount after unlock = %v, want 2", again["DeliveryCount"])
	}
}

func TestRenewExtendsLock(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustSend(t, "q", coretest.Text("a"))
	loc, _ := e.peekLock(t, "q")
	e.Clock.Advance(50 * time.Second)
	w := e.do(t, request{method: "POST", target: loc})
	if w.Code != http.StatusOK {
		t.Fatalf("renew: %d %s", w.Code, w.Body.String())
	}
	want := coretest.Epoch.Add(110 * time.Second).Format(http.TimeFormat)
	if got := hget(w.Header(), "BrokerProperties"); !strings.Contains(got, want) {
		t.Errorf("renew BrokerProperties %q, want LockedUntilUtc %q", got, want)
	}
	e.Clock.Advance(50 * time.Second) // past the original lock, inside the renewed one
	if w := e.do(t, request{method: "DELETE", target: loc}); w.Code != http.StatusOK {
		t.Fatalf("complete after renew: %d %s", w.Code, w.Body.String())
	}
}

func TestSettleErrors(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustSend(t, "q", coretest.Text("a"))
	loc, _ := e.peekLock(t, "q")
	e.Clock.Advance(61 * time.Second)
	unknown := core.NewUUID().String()
	cases := []struct {
		name   string
		req    request
		status int
	}{
		{"expired lock complete", request{method: "DELETE", target: loc}, 404},
		{"expired lock renew", request{method: "POST", target: loc}, 404},
		{"unknown lock unlock", request{method: "PUT", target: "/q/messages/1/" + unknown}, 404},
		{"unknown entity", request{method: "DELETE", target: "/gone/messages/1/" + unknown}, 410},
		{"malformed lock", request{method: "DELETE", target: "/q/messages/1/not-a-guid"}, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if w := e.do(t, c.req); w.Code != c.status {
				t.Fatalf("got %d, want %d: %s", w.Code, c.status, w.Body.String())
			}
		})
	}
}

// TestRESTLockSettledByCore proves that locks are shared across protocols:
// a lock taken over REST is settled through core.Broker.Settle, the path
// the AMQP front uses, with the token REST returned.
func TestRESTLockSettledByCore(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustSend(t, "q", coretest.Text("a"))
	_, bp := e.peekLock(t, "q")
	tok, err := core.ParseUUID(bp["LockToken"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.Settle(t.Context(), "q", tok, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatalf("core settle of a REST lock: %v", err)
	}
	if c, _ := e.Broker.Counts("q"); c.Total != 0 {
		t.Errorf("message not completed: %+v", c)
	}
}
