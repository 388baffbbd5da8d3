package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// frontDescs describe the namespace-level series of the protocol fronts,
// labelled by protocol (Azure reports these for the namespace).
type frontDescs struct {
	active, opened, closed                          *prometheus.Desc
	successful, userErrors, serverErrors, throttled *prometheus.Desc
}

func newFrontDescs() frontDescs {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("omnibus_"+name, help, []string{"protocol"}, nil)
	}
	return frontDescs{
		active:       d("active_connections", "Connections open now (Azure: ActiveConnections); AMQP counts those past the open handshake, WebSockets included."),
		opened:       d("connections_opened_total", "Connections opened (Azure: ConnectionsOpened)."),
		closed:       d("connections_closed_total", "Connections closed (Azure: ConnectionsClosed)."),
		successful:   d("successful_requests_total", "Requests that succeeded (Azure: SuccessfulRequests): AMQP sends, settlements, $management and $cbs requests; HTTP REST and ATOM requests."),
		userErrors:   d("user_errors_total", "Requests refused for what the client asked: not found, lock lost, unauthorized, bad request, quota (Azure: UserErrors)."),
		serverErrors: d("server_errors_total", "Requests that failed inside the broker (Azure: ServerErrors)."),
		throttled:    d("throttled_requests_total", "Requests refused as server busy, which clients retry: a full disk, a store refusing writes (Azure: ThrottledRequests)."),
	}
}

func (d *frontDescs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.active, d.opened, d.closed, d.successful, d.userErrors, d.serverErrors, d.throttled} {
		ch <- x
	}
}

func (d *frontDescs) collect(ch chan<- prometheus.Metric, fronts []Front) {
	for _, f := range fronts {
		s := f.Stats()
		p := f.Protocol
		ch <- prometheus.MustNewConstMetric(d.active, prometheus.GaugeValue, float64(s.ActiveConnections), p)
		for _, c := range []struct {
			d *prometheus.Desc
			v int64
		}{{d.opened, s.ConnectionsOpened}, {d.closed, s.ConnectionsClosed}, {d.successful, s.Successful},
			{d.userErrors, s.UserErrors}, {d.serverErrors, s.ServerErrors}, {d.throttled, s.Throttled}} {
			ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v), p)
		}
	}
}
