package httpgw

import "net/http"

// health handles GET /health like the Service Bus emulator: 200 with
// {"status":"healthy"} while the gateway serves. It needs no token.
func (g *Gateway) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"status":"healthy"}` + "\n"))
}
