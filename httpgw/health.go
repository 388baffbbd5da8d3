package httpgw

import (
	"encoding/json"
	"net/http"
)

// Component is one part of omnibus that GET /health reports on: a
// listener, the store.
type Component struct {
	// Name is how the report names it: "amqp", "http", "https", "store".
	Name string
	// Health returns nil while the component serves, or why it does not.
	// It is called on every GET /health, so it must be cheap.
	Health func() error
}

// Health words of the report, for the whole and for each component.
const (
	statusHealthy  = "healthy"
	statusDegraded = "degraded"
)

// healthReport is the body of GET /health.
type healthReport struct {
	Status     string            `json:"status"`
	Components []componentHealth `json:"components,omitempty"`
}

type componentHealth struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// health handles GET /health, which needs no token: 200 with
// {"status":"healthy",…} while every component serves, 503 with
// {"status":"degraded",…} and each failing component's reason otherwise.
// The Service Bus emulator answers {"status":"healthy"}; the components
// list is ours.
func (g *Gateway) health(w http.ResponseWriter, r *http.Request) {
	rep := healthReport{Status: statusHealthy, Components: make([]componentHealth, 0, len(g.cfg.Components))}
	for _, c := range g.cfg.Components {
		ch := componentHealth{Name: c.Name, Status: statusHealthy}
		if err := c.Health(); err != nil {
			ch.Status, ch.Reason = statusDegraded, err.Error()
			rep.Status = statusDegraded
		}
		rep.Components = append(rep.Components, ch)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		g.writeError(w, r, http.StatusInternalServerError, "SubCode=50000. Encoding the health report failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if rep.Status == statusHealthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(append(body, '\n'))
}
