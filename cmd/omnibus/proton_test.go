package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Transactions through Qpid Proton's Python binding (Debian's
// python3-qpid-proton: Container.declare_transaction and Transaction's
// accept, send, commit and abort) against the omnibus binary. The Python
// files are in amqpserver/protontest.

// protonPython is Debian's interpreter, which python3-qpid-proton
// installs into (a python3 earlier on PATH, such as pyenv's, does not see
// it).
const protonPython = "/usr/bin/python3"

const protonConfig = `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[
  {"Name":"txn-in"},{"Name":"txn-out"},{"Name":"txn-other"},
  {"Name":"txn-short","Properties":{"LockDuration":"PT5S"}}]}],"Logging":{"Type":"Console"}}}`

var protonRan = regexp.MustCompile(`Ran (\d+) tests?`)

// protonBroker builds omnibus and starts it on a fresh data directory
// with the transaction queues and a 3 s transaction timeout. It returns
// the binary, the process, its arguments and the environment the Python
// files read.
func protonBroker(t *testing.T) (bin string, p *proc, args, env []string) {
	t.Helper()
	bin = buildBinary(t) // first: it skips the test under -short
	if out, err := exec.Command(protonPython, "-c", "import proton").CombinedOutput(); err != nil {
		t.Fatalf("Qpid Proton's Python binding is not installed (make pydeps installs Debian's python3-qpid-proton): %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(protonConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	args = []string{"--data", filepath.Join(dir, "data"), "--config", cfg, "--amqp-addr", "127.0.0.1:0",
		"--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-", "--txn-timeout", "3s"}
	p = startBinary(t, bin, nil, args...)
	return bin, p, args, protonEnv(p)
}

func protonEnv(p *proc) []string {
	return append(os.Environ(), "OMNIBUS_PROTON_URL=amqp://"+p.amqp,
		"OMNIBUS_PROTON_USER=RootManageSharedAccessKey", "OMNIBUS_PROTON_PASSWORD=SAS_KEY_VALUE",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+protonDir())
}

func protonDir() string { return filepath.Join("..", "..", "amqpserver", "protontest") }

// TestProtonTransactions runs amqpserver/protontest's unittest files:
// commit, rollback, a second entity refused, send-via, timeout.
func TestProtonTransactions(t *testing.T) {
	_, _, _, env := protonBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, protonPython, "-m", "unittest", "discover", "-s", protonDir(), "-p", "test_*.py", "-v")
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Proton transaction tests failed: %v\n%s", err, out)
	}
	m := protonRan.FindSubmatch(out)
	if m == nil {
		t.Fatalf("the Python run does not say it ran the tests:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 6 {
		t.Fatalf("the Python run ran %d tests, want 6:\n%s", n, out)
	}
	t.Logf("%s", out)
}

// protonStep runs a Python snippet with txnclient imported and returns
// its output.
func protonStep(t *testing.T, env []string, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, protonPython, "-c", "from txnclient import *\n"+code)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// kill9 kills the broker with SIGKILL and waits for it.
func kill9(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	_ = p.cmd.Wait()
}

// TestProtonTransactionKill9 kills the broker with SIGKILL between a
// transaction's operations and its discharge: after the restart nothing
// of it happened, and nothing else was lost. Then it kills the broker
// right after a commit was accepted: after the restart all of it is
// there.
func TestProtonTransactionKill9(t *testing.T) {
	bin, p, args, env := protonBroker(t)
	protonStep(t, env, `send_plain("txn-in", ["a", "b"]); send_plain("txn-other", ["bystander"])`)

	// Operations done, discharge never sent: the Python client waits in
	// the middle of its transaction while the broker is killed.
	py := exec.Command(protonPython, "-c", `from txnclient import *
import sys, time
def before(h):
    print("PENDING", flush=True)
    time.sleep(60)
run_txn("txn-in", 1, ["lost"], "txn-out", commit=True, send_via="txn-in", before_discharge=before)`)
	py.Env = env
	stdout, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	py.Stderr = os.Stderr
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = py.Process.Kill(); _ = py.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "PENDING" {
		t.Fatalf("the transaction did not reach its discharge: %q %v", line, err)
	}
	kill9(t, p)
	_ = py.Process.Kill()
	_ = py.Wait()

	p = startBinary(t, bin, nil, args...)
	env = protonEnv(p)
	if got := protonStep(t, env, `print(sorted(drain("txn-in", expect=2)), sorted(drain("txn-out")), sorted(drain("txn-other", expect=1)))`); got != "['a', 'b'] [] ['bystander']" {
		t.Fatalf("after a kill before the discharge, txn-in, txn-out and txn-other hold %s; want ['a', 'b'] [] ['bystander']", got)
	}
	protonStep(t, env, `send_plain("txn-in", ["a", "b"])`)

	// A commit accepted, then SIGKILL at once.
	if got := protonStep(t, env, `o = run_txn("txn-in", 1, ["kept"], "txn-out", commit=True, send_via="txn-in"); print(o.discharge, o.send_errors, o.received)`); !strings.HasPrefix(got, "committed [] ['") {
		t.Fatalf("commit: %s", got)
	}
	kill9(t, p)
	p = startBinary(t, bin, nil, args...)
	env = protonEnv(p)
	got := protonStep(t, env, `print(sorted(drain("txn-in", expect=1)), sorted(drain("txn-out", expect=1)))`)
	if got != "['a'] ['kept']" && got != "['b'] ['kept']" {
		t.Fatalf("after a kill right after the commit, txn-in and txn-out hold %s; want one input left and [kept]", got)
	}
}

// TestProtonDrainFailsOnALostConnection: txnclient's drain takes only a
// receive that times out for "nothing more". A connection the broker
// drops while drain waits (here: the broker killed with SIGKILL) must make
// it raise; read as an empty queue, it would pass every negative check of
// the transaction tests (drain(...) == []) against a broker that cannot
// be read at all.
func TestProtonDrainFailsOnALostConnection(t *testing.T) {
	_, p, _, env := protonBroker(t)
	// ATTACHED is printed once drain's receiver is attached, so that the
	// kill lands while it waits for messages.
	py := exec.Command(protonPython, "-c", `from txnclient import *
from proton.utils import BlockingConnection
attach = BlockingConnection.create_receiver
def create_receiver(self, *args, **kwargs):
    r = attach(self, *args, **kwargs)
    print("ATTACHED", flush=True)
    return r
BlockingConnection.create_receiver = create_receiver
print("DRAINED", drain("txn-in", wait=10), flush=True)`)
	py.Env = env
	stdout, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	py.Stderr = &stderr
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = py.Process.Kill() })
	rd := bufio.NewReader(stdout)
	if line, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ATTACHED" {
		t.Fatalf("drain did not attach its receiver: %q %v\n%s", line, err, stderr.String())
	}
	kill9(t, p)
	rest, _ := io.ReadAll(rd)
	err = py.Wait()
	if err == nil || strings.Contains(string(rest), "DRAINED") {
		t.Fatalf("drain on a connection the broker dropped returned (exit %v): %s%s", err, rest, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Connection") {
		t.Errorf("drain raised, but not for the lost connection:\n%s", stderr.String())
	}
}
