package httpgw

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPropertiesOver64KB: over a real socket with net/http, a message
// whose custom properties take more than 64 KB in all (Service Bus's
// quota for a message's properties) is refused with 400 and stored
// nowhere, whether they come as headers of a single send or as a batch
// item's UserProperties, and each property stays within 32 KB; properties
// just under the quota are stored and come back.
func TestPropertiesOver64KB(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	srv := newE2EServer(t, e)
	client := srv.Client()
	send := func(t *testing.T, req *http.Request) (int, string) {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	quoted := func(n int) string { return `"` + strings.Repeat("v", n-2) + `"` }
	batchOf := func(props map[string]string) string {
		values := make(map[string]string, len(props))
		for k, v := range props {
			values[k] = strings.Trim(v, `"`) // a JSON string, not a quoted header
		}
		b, err := json.Marshal([]map[string]any{{"Body": "batched", "UserProperties": values}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct {
		name   string
		props  map[string]string // property name → value as sent (a header's text)
		status int
		detail string
	}{
		{"three of 24 KB", map[string]string{"A": quoted(24 << 10), "B": quoted(24 << 10), "C": quoted(24 << 10)}, 400, "65536 bytes in total"},
		{"one of 33 KB", map[string]string{"A": quoted(33 << 10)}, 400, "at most 32768"},
		{"two of 30 KB", map[string]string{"A": quoted(30 << 10), "B": quoted(30 << 10)}, 201, ""},
	}
	for _, c := range cases {
		for _, batch := range []bool{false, true} {
			name := c.name + map[bool]string{false: " as headers", true: " in a batch"}[batch]
			t.Run(name, func(t *testing.T) {
				var req *http.Request
				if batch {
					req = signedRequest(t, "POST", srv.URL+"/q/messages", batchOf(c.props))
					req.Header.Set("Content-Type", batchContentType)
				} else {
					req = signedRequest(t, "POST", srv.URL+"/q/messages", "single")
					for k, v := range c.props {
						req.Header.Set(k, v)
					}
				}
				status, got := send(t, req)
				if status != c.status || !strings.Contains(got, c.detail) {
					t.Fatalf("got %d %q, want %d containing %q", status, got, c.status, c.detail)
				}
				if status != http.StatusCreated {
					if n := e.MustCounts(t, "q").Active; n != 0 {
						t.Fatalf("%d messages stored after a refused send", n)
					}
					return
				}
				m := e.receiveOne(t, "q")
				for k, v := range c.props {
					if got, _ := m.ApplicationProperties[k].(string); got != strings.Trim(v, `"`) {
						t.Errorf("property %s came back with %d bytes, want %d", k, len(got), len(v)-2)
					}
				}
			})
		}
	}
}
