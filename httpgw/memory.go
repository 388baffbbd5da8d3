package httpgw

import (
	"net/http"
)

// The memory budget (Config.Memory) on the HTTP gateway: a send's body
// is taken from it as it is read (body.go), a received message while it
// is written (receive.go), and a console page's bodies before they are
// loaded (console/peekpage.go). What it has no room for is refused with
// refuseMemory.

// refuseMemory answers a request the memory budget has no room for: 503
// server busy with Retry-After, which the SDKs retry. It is not logged:
// the budget counts its refusals (metrics).
func (g *Gateway) refuseMemory(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "1")
	g.writeError(w, r, http.StatusServiceUnavailable,
		"SubCode=50004. The server is busy: the memory its clients may make it hold (--max-memory) is in use. Retry later")
}
