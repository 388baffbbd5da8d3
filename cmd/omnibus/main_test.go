package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/cmd/internal/binarytest"
	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/core/sas"
)

// buildBinary compiles omnibus for a test that runs it as a process, and
// skips that test under -short, as it does every test that builds and
// runs the binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	return binarytest.Build(t)
}

type proc struct {
	cmd  *exec.Cmd
	amqp string
	logs *logBuffer
	done chan struct{}
}

// logBuffer collects the broker's log lines; the reader goroutine writes
// while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// contains reports whether the broker logged text within a generous
// deadline: a line reaches the buffer through a pipe and the reader
// goroutine, a moment after what it reports was seen by a client.
func (l *logBuffer) contains(text string) bool {
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(l.String(), text) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

var amqpAddrRE = regexp.MustCompile(`"amqp": "([^"]+)"`)

// startBinary runs omnibus and waits for its ready line.
func startBinary(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// Not the default :5301: tests (and other brokers) run side by side.
	cmd.Env = append(append([]string{"OMNIBUS_METRICS_ADDR=127.0.0.1:0"}, os.Environ()...), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: &logBuffer{}, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		defer close(p.done)
		var addr string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			if m := amqpAddrRE.FindStringSubmatch(line); m != nil && strings.Contains(line, "omnibus is ready") {
				addr = m[1]
			}
			if strings.Contains(line, "connect with") {
				ready <- addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done; _ = cmd.Wait() })
	select {
	case p.amqp = <-ready:
	case <-p.done:
		t.Fatalf("omnibus exited before it was ready:\n%s", p.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("omnibus not ready in 30s:\n%s", p.logs)
	}
	return p
}

func connStr(addr string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true", addr)
}

const killConfig = `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[{"Name":"q"}]}],"Logging":{"Type":"Console"}}}`

// TestKill9KeepsAcknowledgedMessages kills the broker with SIGKILL right
// after the sends were acknowledged and finds every message after restart.
func TestKill9KeepsAcknowledgedMessages(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(killConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--data", filepath.Join(dir, "data"), "--config", cfg, "--amqp-addr", "127.0.0.1:0", "--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-"}
	p := startBinary(t, bin, nil, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := azservicebus.NewClientFromConnectionString(connStr(p.amqp), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(i))}, nil) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	_ = p.cmd.Wait()
	_ = c.Close(context.Background())

	p2 := startBinary(t, bin, nil, args...)
	c2, err := azservicebus.NewClientFromConnectionString(connStr(p2.amqp), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(context.Background())
	r, err := c2.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		msgs, err := r.ReceiveMessages(ctx, 100, nil)
		if err != nil {
			t.Fatalf("receive after kill -9: %v (have %d of %d)", err, len(seen), n)
		}
		for _, m := range msgs {
			seen[string(m.Body)] = true
		}
	}
}

// TestEnvAndCleanShutdown configures the broker only through OMNIBUS_*
// variables and stops it with SIGTERM.
func TestEnvAndCleanShutdown(t *testing.T) {
	bin := buildBinary(t)
	p := startBinary(t, bin, []string{"OMNIBUS_MEMORY=true", "OMNIBUS_AMQP_ADDR=127.0.0.1:0", "OMNIBUS_HTTP_ADDR=-", "OMNIBUS_HTTPS_ADDR=-", "OMNIBUS_AMQPS_ADDR=-"})
	if p.amqp == "" {
		t.Fatalf("no AMQP address in the ready line:\n%s", p.logs)
	}
	if !strings.Contains(p.logs.String(), "UseDevelopmentEmulator=true") {
		t.Errorf("the connection string was not logged:\n%s", p.logs)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30s after SIGTERM")
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, p.logs)
	}
	if !strings.Contains(p.logs.String(), "stopped cleanly") {
		t.Errorf("no clean stop logged:\n%s", p.logs)
	}
}

// TestProtectedModeSaysSoAtStart: with the emulator's key the binary
// says at start that it serves only loopback; OMNIBUS_ALLOW_REMOTE or a
// key of one's own turn protected mode off, and the line with it.
func TestProtectedModeSaysSoAtStart(t *testing.T) {
	bin := buildBinary(t)
	base := []string{"OMNIBUS_MEMORY=true", "OMNIBUS_AMQP_ADDR=127.0.0.1:0", "OMNIBUS_HTTP_ADDR=-", "OMNIBUS_HTTPS_ADDR=-", "OMNIBUS_AMQPS_ADDR=-"}
	for _, c := range []struct {
		env       []string
		protected bool
	}{
		{nil, true},
		{[]string{"OMNIBUS_ALLOW_REMOTE=true"}, false},
		{[]string{"OMNIBUS_KEY=my-own-key"}, false},
	} {
		p := startBinary(t, bin, append(append([]string{}, base...), c.env...))
		said := strings.Contains(p.logs.String(), "protected mode: the publicly known emulator key")
		if said != c.protected {
			t.Errorf("env %v: protected-mode line logged %v, want %v:\n%s", c.env, said, c.protected, p.logs)
		}
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func TestBadFlagEnv(t *testing.T) {
	t.Setenv("OMNIBUS_MAX_CONNECTIONS", "many")
	err := serve(nil)
	if err == nil || !strings.Contains(err.Error(), "OMNIBUS_MAX_CONNECTIONS") || cli.ExitCode(err) != 2 {
		t.Fatalf("serve with a bad env value: %v", err)
	}
}

func TestNegativeTokenClockSkew(t *testing.T) {
	err := serve([]string{"--token-clock-skew", "-1s"})
	if err == nil || !strings.Contains(err.Error(), "--token-clock-skew") || cli.ExitCode(err) != 2 {
		t.Fatalf("serve with a negative clock skew: %v", err)
	}
}

func TestTokenValidates(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = runToken([]string{"--resource", "http://localhost:5300/orders", "--ttl", "10m"})
	os.Stdout = stdout
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: "RootManageSharedAccessKey", Key: "SAS_KEY_VALUE", Rights: sas.Manage}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(strings.TrimSpace(string(out)), "orders", sas.Send); err != nil {
		t.Fatalf("token %q does not validate: %v", out, err)
	}
}

var debugAddrRE = regexp.MustCompile(`"debug": "([^"]+)"`)

// TestDebugAddrServesProfiles starts the binary with --debug-addr and
// reads a profile index and a heap profile from it.
func TestDebugAddrServesProfiles(t *testing.T) {
	bin := buildBinary(t)
	p := startBinary(t, bin, nil, "--memory", "--amqp-addr", "127.0.0.1:0", "--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-",
		"--debug-addr", "127.0.0.1:0")
	m := debugAddrRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no debug address in the ready line:\n%s", p.logs)
	}
	for path, want := range map[string]string{
		"/debug/pprof/":             "goroutine",
		"/debug/pprof/heap?debug=1": "heap profile",
	} {
		resp, err := http.Get("http://" + m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q:\n%.300s", path, resp.StatusCode, want, body)
		}
	}
}
