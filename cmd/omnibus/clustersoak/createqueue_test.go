package clustersoak

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// TestCreateQueueTakesConflictOnARetry: a create whose first attempt was
// refused (503) and whose retry finds the queue made (409) succeeded; a
// 409 at the first attempt is the queue made by someone else, an error.
func TestCreateQueueTakesConflictOnARetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []int
		wantErr bool
	}{
		{"refused, then found made", []int{http.StatusServiceUnavailable, http.StatusConflict}, false},
		{"there before the first attempt", []int{http.StatusConflict}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var puts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := int(puts.Add(1)) - 1
				code := tc.answers[min(i, len(tc.answers)-1)]
				w.WriteHeader(code)
				_, _ = w.Write([]byte("<Error><Code>" + http.StatusText(code) + "</Code></Error>"))
			}))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			adm, err := admin.NewClientFromConnectionString("Endpoint=sb://localhost/;SharedAccessKeyName=k;SharedAccessKey=v",
				&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: plainHTTP{addr: addr}, Retry: policy.RetryOptions{MaxRetries: -1}}})
			if err != nil {
				t.Fatal(err)
			}
			err = createQueue(context.Background(), adm, "q", nil, 300*time.Millisecond)
			if (err != nil) != tc.wantErr {
				t.Fatalf("createQueue after answers %v: %v, want an error: %v", tc.answers, err, tc.wantErr)
			}
		})
	}
}
