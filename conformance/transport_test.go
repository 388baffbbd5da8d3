package conformance

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/httpgw"
)

var transportScenarios = regexp.MustCompile(`^(tls-|websocket-)`)

// TestTransportScenarios runs the AMQPS and WebSocket scenarios against a
// real omnibus: they pass trusting its CA, fail trusting another CA (they
// do check the certificate), and skip, saying why, on a target that names
// neither endpoint.
func TestTransportScenarios(t *testing.T) {
	a, err := app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		AMQPSAddr: "127.0.0.1:0", HTTPSAddr: "127.0.0.1:0", TLSDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	other, err := httpgw.LoadOrCreateCertificates(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	target := func(ca string, transports bool) *Target {
		tg := &Target{ConnectionString: a.ConnectionString(), HTTP: "http://" + a.HTTPAddr().String(), CAFile: ca}
		if transports {
			tg.AMQPS = a.AMQPSAddr().String()
			tg.WebSocket = "wss://" + a.HTTPSAddr().String() + "/$servicebus/websocket"
		}
		return tg
	}
	run := func(tg *Target) *Report {
		rep, err := Run(t.Context(), tg, Options{Only: transportScenarios})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != 5 {
			t.Fatalf("%d transport scenarios ran, want 5", len(rep.Results))
		}
		return rep
	}
	for _, r := range run(target(a.CAPath, true)).Results {
		if r.Status != Passed {
			t.Errorf("%s trusting omnibus's CA: %s %s", r.Name, r.Status, r.Detail)
		}
	}
	for _, r := range run(target(other.CAPath, true)).Results {
		if r.Status != Failed || !strings.Contains(r.Detail, "certificate") {
			t.Errorf("%s trusting another CA: %s %q, want a certificate failure", r.Name, r.Status, r.Detail)
		}
	}
	for _, r := range run(target("", false)).Results {
		if r.Status != Skipped || !strings.Contains(r.Detail, "endpoint") {
			t.Errorf("%s without the endpoints: %s %q, want a skip naming the missing endpoint", r.Name, r.Status, r.Detail)
		}
	}
}
