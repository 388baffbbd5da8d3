package sas_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/omnibusmq/omnibus/core/sas"
)

// TestGoAdminClientTokens validates the Authorization headers the real Go
// admin client (azservicebus/admin) sends: their sr is the lower-cased,
// escaped full request URL including the api-version query.
func TestGoAdminClientTokens(t *testing.T) {
	type seen struct{ path, auth string }
	var (
		mu   sync.Mutex
		reqs []seen
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.URL.Path, r.Header.Get("Authorization")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<Error><Code>404</Code><Detail>not here</Detail></Error>"))
	}))
	t.Cleanup(srv.Close)

	host := strings.TrimPrefix(srv.URL, "https://")
	const key = "c2VjcmV0LWtleS12YWx1ZQ=="
	client, err := admin.NewClientFromConnectionString(
		"Endpoint=sb://"+host+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+key,
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{
			Transport: srv.Client(),
			Retry:     policy.RetryOptions{MaxRetries: -1},
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, _ = client.GetQueue(ctx, "Orders", nil)
	_, _ = client.GetSubscription(ctx, "t1", "s1", nil)
	pager := client.NewListQueuesPager(nil)
	_, _ = pager.NextPage(ctx)

	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: "RootManageSharedAccessKey", Key: key, Rights: sas.Manage}}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: "RootManageSharedAccessKey", Key: "wrong", Rights: sas.Manage}}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) < 3 {
		t.Fatalf("server saw %d requests, want at least 3", len(reqs))
	}
	for _, r := range reqs {
		if _, err := v.Validate(r.auth, r.path, sas.Manage); err != nil {
			t.Errorf("token for %s refused: %v (token %q)", r.path, err, r.auth)
		}
		if _, err := v.Validate(r.auth, r.path+"-other", sas.Manage); err == nil {
			t.Errorf("token for %s accepted for a sibling path", r.path)
		}
		if _, err := other.Validate(r.auth, r.path, sas.Manage); err == nil {
			t.Errorf("token for %s accepted with the wrong key", r.path)
		}
	}
}
