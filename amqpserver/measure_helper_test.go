package amqpserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// The measurements of held connections run the server in a child process
// (this test binary, started with serverProcessEnv set), so that its
// memory is the server's alone. The child prints its address, then
// answers each "stats" line on stdin with one line of figures, and shuts
// down when stdin closes.
const serverProcessEnv = "AMQPSERVER_TEST_SERVER_PROCESS"

// serverNOFILEEnv, when set in the child, lowers its RLIMIT_NOFILE to that
// many descriptors, so that accepts fail with EMFILE.
const serverNOFILEEnv = "AMQPSERVER_TEST_NOFILE"

// runServerProcess is the child's main: a server with the test key over a
// memstore broker with queue "q". It returns the exit code.
func runServerProcess() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "server process:", err)
		return 1
	}
	if v := os.Getenv(serverNOFILEEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fail(err)
		}
		if err := setNOFILE(n); err != nil {
			return fail(err)
		}
	}
	b, err := core.New(core.Config{Store: memstore.New(), Clock: clock.Real{}})
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	if _, err := b.CreateEntity(context.Background(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		return fail(err)
	}
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{{KeyName: testKeyName, Key: testKey, Rights: sas.Manage}}})
	if err != nil {
		return fail(err)
	}
	// Held sockets must outlive the measurement: a minute to log in.
	srv, err := New(Config{Broker: b, Auth: v, AuthTimeout: time.Minute})
	if err != nil {
		return fail(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	go srv.Serve(l)
	fmt.Println(l.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "health" {
			if err := srv.Health(); err != nil {
				fmt.Println("health:", strings.ReplaceAll(err.Error(), "\n", "; "))
			} else {
				fmt.Println("health: ok")
			}
			continue
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("goroutines=%d heap_inuse=%d stack_inuse=%d\n", runtime.NumGoroutine(), ms.HeapInuse, ms.StackInuse)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return 0
}

// serverProcess is a running child server.
type serverProcess struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string
	in   *os.File
	out  *bufio.Scanner
}

func startServerProcess(t testing.TB, env ...string) *serverProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), serverProcessEnv+"=1"), env...)
	cmd.Stderr = os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	p := &serverProcess{t: t, cmd: cmd, in: w, out: bufio.NewScanner(stdout)}
	t.Cleanup(p.stop)
	if !p.out.Scan() {
		t.Fatalf("server process printed no address: %v", p.out.Err())
	}
	p.addr = strings.TrimSpace(p.out.Text())
	return p
}

func (p *serverProcess) stop() {
	if p.in == nil {
		return
	}
	p.in.Close()
	p.in = nil
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("server process: %v", err)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
		p.t.Error("server process did not stop within 30 s")
	}
}

// procStats are a child server's figures: RSS and its peak from
// /proc/PID/status, and what the Go runtime reports after a GC.
type procStats struct {
	rss, hwm              int64 // bytes
	goroutines            int
	heapInuse, stackInuse int64
}

func (p *serverProcess) stats() procStats {
	p.t.Helper()
	var s procStats
	if _, err := fmt.Fprintln(p.in, "stats"); err != nil {
		p.t.Fatal(err)
	}
	if !p.out.Scan() {
		p.t.Fatalf("server process: no stats: %v", p.out.Err())
	}
	if _, err := fmt.Sscanf(p.out.Text(), "goroutines=%d heap_inuse=%d stack_inuse=%d", &s.goroutines, &s.heapInuse, &s.stackInuse); err != nil {
		p.t.Fatalf("stats line %q: %v", p.out.Text(), err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Logf("RSS not available (no /proc): %v", err)
		return s
	}
	for line := range bytes.Lines(status) {
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			s.rss = kb << 10
		case "VmHWM:":
			s.hwm = kb << 10
		}
	}
	return s
}

// health returns what the child's Server.Health says: "ok" or the error.
func (p *serverProcess) health() string {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, "health"); err != nil {
		p.t.Fatal(err)
	}
	if !p.out.Scan() {
		p.t.Fatalf("server process: no health: %v", p.out.Err())
	}
	return strings.TrimPrefix(p.out.Text(), "health: ")
}

func (s procStats) String() string {
	return fmt.Sprintf("RSS %.1f MiB (peak %.1f MiB), %d goroutines, heap %.1f MiB, stacks %.1f MiB",
		mib(s.rss), mib(s.hwm), s.goroutines, mib(s.heapInuse), mib(s.stackInuse))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
