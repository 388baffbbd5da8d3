package amqpserver_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
)

// The Python SDK (Debian's python3-azure: azure-servicebus 7.8 on uamqp
// 1.5, a C AMQP stack none of the other tests use) runs the unittest
// files in pytest/ against a whole omnibus: AMQPS for messaging, HTTPS
// for its administration client. It ignores UseDevelopmentEmulator and
// always dials TLS on 5671, so the broker listens there on a loopback
// address of its own.

// python is Debian's interpreter, which python3-azure installs into (a
// python3 earlier on PATH, such as pyenv's, does not see it).
const python = "/usr/bin/python3"

const pythonConfig = `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns",
  "Queues":[{"Name":"py-basic","Properties":{"LockDuration":"PT5S"}},{"Name":"py-batch"},{"Name":"py-settle"},{"Name":"py-lock"},{"Name":"py-schedule"},
    {"Name":"py-sessions","Properties":{"RequiresSession":true}},{"Name":"py-session-state","Properties":{"RequiresSession":true}},
    {"Name":"py-session-expire","Properties":{"RequiresSession":true,"LockDuration":"PT5S"}}],
  "Topics":[{"Name":"py-topic","Properties":{},"Subscriptions":[
    {"Name":"all","Properties":{}},
    {"Name":"red","Properties":{},"Rules":[{"Name":"reds","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"color = 'red'"}}}]}]}]}],
  "Logging":{"Type":"Console"}}}`

var ranTests = regexp.MustCompile(`Ran (\d+) tests?`)

func TestPythonSDK(t *testing.T) {
	if out, err := exec.Command(python, "-c", "import azure.servicebus, uamqp").CombinedOutput(); err != nil {
		t.Fatalf("the Python SDK is not installed (make pydeps installs Debian's python3-azure): %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(pythonConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	a, ip := startOn5671(t, app.Options{Memory: true, ConfigPath: cfg, AMQPAddr: "-", HTTPAddr: "-", HTTPSAddr: "", TLSDir: dir,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	_, httpsPort, _ := net.SplitHostPort(a.HTTPSAddr().String())
	runPython(t, python, "pytest", pythonEnv(a, ip, httpsPort), 11)
}

// startOn5671 starts a with AMQPS on port 5671 of a random 127.x.y.z
// address (and HTTPS on a free port of it), trying others while the port
// is taken there, and returns it with the address.
func startOn5671(t *testing.T, o app.Options) (*app.App, string) {
	t.Helper()
	for range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(256), 1+rand.IntN(250))
		o.AMQPSAddr, o.HTTPSAddr, o.TLSHosts = ip+":5671", ip+":0", []string{ip}
		a, err := app.Start(o)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
		return a, ip
	}
	t.Fatal("no 127.x.y.z address with port 5671 free")
	return nil, ""
}
