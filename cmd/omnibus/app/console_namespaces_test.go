package app

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// consoleCall calls the console API with token (and a JSON body for a
// POST).
func consoleCall(t *testing.T, a *App, method, call, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+a.HTTPAddr().String()+"/console/$api/"+call, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleNamespacePicker: logged in with the root key, the console
// lists every namespace and switches to one; the token it hands out takes
// the console's calls and the gateway's REST calls to that namespace. A
// key of a namespace's own rule sees that namespace only and cannot
// switch.
func TestConsoleNamespacePicker(t *testing.T) {
	a := startNamespaces(t, false)
	if st, body := rootCall(t, a, http.MethodPut, "/$namespaces/shop", shopRules); st != http.StatusCreated {
		t.Fatalf("create shop: %d %s", st, body)
	}
	if _, err := adminFor(t, a, "admin@shop", adminKey).CreateQueue(t.Context(), "shop-orders", nil); err != nil {
		t.Fatal(err)
	}
	login := func(keyName, key string) string {
		t.Helper()
		st, body := consoleCall(t, a, http.MethodPost, "login", "", `{"keyName":"`+keyName+`","key":"`+key+`"}`)
		var s struct{ Token, Namespace string }
		if st != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
			t.Fatalf("login as %s: %d %s", keyName, st, body)
		}
		return s.Token
	}
	root := login(DefaultKeyName, DefaultKey)
	st, body := consoleCall(t, a, http.MethodGet, "namespaces", root, "")
	var list struct {
		Current string
		Names   []string
		Switch  bool
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || !list.Switch || list.Current != a.Namespace ||
		strings.Join(list.Names, ",") != a.Namespace+",shop" {
		t.Fatalf("namespaces for the root key: %d %s", st, body)
	}
	st, body = consoleCall(t, a, http.MethodPost, "namespaces/switch", root, `{"namespace":"shop"}`)
	var sw struct{ Token, KeyName, Namespace string }
	if st != http.StatusOK || json.Unmarshal([]byte(body), &sw) != nil || sw.Namespace != "shop" || sw.KeyName != "admin@shop" {
		t.Fatalf("switch to shop: %d %s", st, body)
	}
	if st, body := consoleCall(t, a, http.MethodGet, "entities?kind=queues", sw.Token, ""); st != http.StatusOK || !strings.Contains(body, `"shop-orders"`) {
		t.Errorf("shop's queues through the switched token: %d %s", st, body)
	}
	if st, body := consoleCall(t, a, http.MethodGet, "entities?kind=queues", root, ""); st != http.StatusOK || strings.Contains(body, "shop-orders") {
		t.Errorf("the default namespace's queues show shop's: %d %s", st, body)
	}
	// The gateway's REST API takes the switched token to shop too.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+a.HTTPAddr().String()+"/shop-orders/messages", strings.NewReader("hi"))
	req.Header.Set("Authorization", sw.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("REST send to shop with the switched token: %d", resp.StatusCode)
	}

	// shop's own admin rule: its namespace only, no switching.
	shop := login("admin@shop", adminKey)
	st, body = consoleCall(t, a, http.MethodGet, "namespaces", shop, "")
	if st != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || list.Switch || strings.Join(list.Names, ",") != "shop" {
		t.Errorf("namespaces for shop's key: %d %s", st, body)
	}
	if st, body := consoleCall(t, a, http.MethodPost, "namespaces/switch", shop, `{"namespace":"`+a.Namespace+`"}`); st != http.StatusUnauthorized {
		t.Errorf("shop's key switching to the default namespace: %d %s, want 401", st, body)
	}
}
