package amqpserver_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
)

// Today's Python SDK (azure-servicebus 7.15 from PyPI, whose AMQP stack
// is its own pure-Python pyamqp, not uamqp) in the virtual environment
// `make pyvenv` makes in pytest/.venv from pytest/requirements.txt. It
// runs the same unittest files as TestPythonSDK (pytest/test_*.py), then
// those only it can run (pytest/current/): AMQP over WebSockets, the
// async client and the emulator connection string. The SDK beta that
// has delete_messages and purge_messages (7.13.0b1; 7.15.0 has neither)
// runs pytest/beta/ from its own environment, pytest/.venv-beta.

// pythonVenvs maps each virtual environment to what `make pyvenv` builds
// it from.
var pythonVenvs = map[string]string{
	"pytest/.venv":      "pytest/requirements.txt",
	"pytest/.venv-beta": "pytest/requirements-beta.txt",
}

// pythonCurrentQueues are the queues of pytest/current and pytest/beta,
// added to pythonConfig's: name → properties.
var pythonCurrentQueues = map[string]map[string]any{
	"py-ws":            {},
	"py-ws-async":      {},
	"py-async":         {"LockDuration": "PT5S"},
	"py-async-session": {"RequiresSession": true},
	"py-emulator":      {},
	"py-delete":        {},
	"py-purge":         {},
	"py-delete-dlq":    {},
}

func TestPythonSDKCurrent(t *testing.T) {
	interp := map[string]string{}
	for venv, req := range pythonVenvs {
		interp[venv] = filepath.Join(venv, "bin", "python")
		installed, _ := os.ReadFile(filepath.Join(venv, ".omnibus-installed-requirements.txt"))
		want, err := os.ReadFile(req)
		if err != nil {
			t.Fatal(err)
		}
		if string(installed) != string(want) {
			t.Fatalf("%s is missing or was made from another %s: run make pyvenv", venv, req)
		}
	}
	for venv, want := range map[string]string{"pytest/.venv": "7.15.0", "pytest/.venv-beta": "7.13.0b1"} {
		// The SDK on pyamqp, its own stack: uamqp is not even installed.
		out, err := exec.Command(interp[venv], "-c",
			"import importlib.util, azure.servicebus; print(azure.servicebus.__version__, importlib.util.find_spec('uamqp') is None)").CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != want+" True" {
			t.Fatalf("%s: azure-servicebus version and uamqp absent: %q (%v), want %q", venv, got, err, want+" True")
		}
	}
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, withQueues(t, pythonConfig, pythonCurrentQueues), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, ip := startOn5671(t, app.Options{Memory: true, ConfigPath: cfg, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-", HTTPSAddr: "", TLSDir: dir,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	_, httpsPort, _ := net.SplitHostPort(a.HTTPSAddr().String())
	_, amqpPort, _ := net.SplitHostPort(a.AMQPAddr().String())
	key := ";SharedAccessKeyName=" + app.DefaultKeyName + ";SharedAccessKey=" + app.DefaultKey
	env := append(pythonEnv(a, ip, httpsPort),
		"OMNIBUS_PY_WEBSOCKET_ENDPOINT=sb://"+ip+":"+httpsPort,
		"OMNIBUS_PY_EMULATOR_CONNECTION_STRING=Endpoint=sb://127.0.0.1:"+amqpPort+key+";UseDevelopmentEmulator=true")

	// The subtests share the broker: their queues are their own.
	t.Run("shared", func(t *testing.T) {
		runPython(t, interp["pytest/.venv"], "pytest", env, 11)
	})
	t.Run("current", func(t *testing.T) {
		runPython(t, interp["pytest/.venv"], "pytest/current", env, 5)
	})
	t.Run("beta", func(t *testing.T) {
		runPython(t, interp["pytest/.venv-beta"], "pytest/beta", env, 2)
	})
}

// pythonEnv is the environment of the Python tests against a, serving on
// ip (AMQPS on 5671) and its HTTPS port.
func pythonEnv(a *app.App, ip, httpsPort string) []string {
	key := ";SharedAccessKeyName=" + app.DefaultKeyName + ";SharedAccessKey=" + app.DefaultKey
	return append(os.Environ(),
		"OMNIBUS_PY_CONNECTION_STRING=Endpoint=sb://"+ip+"/"+key,
		"OMNIBUS_PY_ADMIN_CONNECTION_STRING=Endpoint=sb://"+ip+":"+httpsPort+"/"+key,
		"OMNIBUS_PY_CA="+a.CAPath,
		"REQUESTS_CA_BUNDLE="+a.CAPath,
		"PYTHONDONTWRITEBYTECODE=1",
		// pytest/ on the path, for omnibus_env, when discovery starts in
		// a directory under it.
		"PYTHONPATH=pytest",
		// uamqp, a C library, has crashed the interpreter (SIGSEGV) in
		// some runs under heavy load: the traceback says where.
		"PYTHONFAULTHANDLER=1")
}

// runPython runs `interp -m unittest discover` in dir (test_*.py there,
// not below) with env and fails t unless it passes, having run at least
// atLeast tests.
func runPython(t *testing.T, interp, dir string, env []string, atLeast int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, "-m", "unittest", "discover", "-s", dir, "-p", "test_*.py", "-v")
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python SDK tests in %s failed: %v\n%s", dir, err, out)
	}
	m := ranTests.FindSubmatch(out)
	if m == nil {
		t.Fatalf("the Python run in %s does not say it ran the tests:\n%s", dir, out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < atLeast {
		t.Fatalf("the Python run in %s ran %d tests, want at least %d:\n%s", dir, n, atLeast, out)
	}
	t.Logf("%s", out)
}

// withQueues returns config (an emulator Config.json) with queues added
// to its first namespace.
func withQueues(t *testing.T, config string, queues map[string]map[string]any) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		t.Fatal(err)
	}
	ns := c["UserConfig"].(map[string]any)["Namespaces"].([]any)[0].(map[string]any)
	list := ns["Queues"].([]any)
	for name, props := range queues {
		list = append(list, map[string]any{"Name": name, "Properties": props})
	}
	ns["Queues"] = list
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
