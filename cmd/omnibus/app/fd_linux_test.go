//go:build linux

package app

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap/zaptest"
)

// fdChildEnv marks the child process of TestListenersSurviveFDExhaustion.
const fdChildEnv = "OMNIBUS_TEST_FD_EXHAUSTION_CHILD"

// TestListenersSurviveFDExhaustion runs out of file descriptors for real:
// it lowers RLIMIT_NOFILE so that a client's connection takes the last
// descriptor and the server's accept fails with EMFILE. /health, asked on
// a connection opened before, must say the listener is degraded and why;
// once descriptors are free again the listener must accept again and
// /health be healthy. The limit is the process's, so the test runs in a
// child process of its own.
func TestListenersSurviveFDExhaustion(t *testing.T) {
	if os.Getenv(fdChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestListenersSurviveFDExhaustion$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), fdChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestListenersSurviveFDExhaustion") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	a, err := Start(Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", HTTPSAddr: "-", AMQPSAddr: "-",
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(t.Context())
	k := dialKeepAlive(t, a.HTTPAddr().String())
	if status, h := k.health(t); status != http.StatusOK {
		t.Fatalf("health before: %d %+v", status, h)
	}
	exhaust(t, k, "http", a.HTTPAddr().String())
	exhaust(t, k, "amqp", a.AMQPAddr().String())
}

// exhaust makes the next accept of the listener at addr fail with EMFILE,
// checks /health reports component degraded, frees the descriptors and
// checks the listener serves the waiting connection and /health recovers.
func exhaust(t *testing.T, k *keepAlive, component, addr string) {
	t.Helper()
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Fatal(err)
		}
	}
	defer restore()
	// The client's socket takes the lowest free descriptor; allow exactly
	// that one, so the server's accept finds none.
	limit := syscall.Rlimit{Cur: uint64(lowestFreeFD(t)) + 1, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial at the limit: %v", err)
	}
	defer c.Close()
	k.waitHealth(t, component+" out of descriptors", func(status int, h healthBody) bool {
		s, reason := h.component(component)
		return status == http.StatusServiceUnavailable && h.Status == "degraded" && s == "degraded" &&
			strings.Contains(reason, "too many open files")
	})
	restore()
	k.waitHealth(t, component+" with descriptors again", func(status int, h healthBody) bool {
		return status == http.StatusOK && h.Status == "healthy"
	})
	if component == "http" {
		kc := &keepAlive{c: c, br: bufio.NewReader(c)}
		if status, _ := kc.health(t); status != http.StatusOK {
			t.Fatalf("the connection that waited: %d", status)
		}
	}
}

// lowestFreeFD returns the descriptor the next socket will get.
func lowestFreeFD(t *testing.T) int {
	t.Helper()
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	free := int(d.Fd()) // the lowest free one when it was opened
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd != free {
			used[fd] = true
		}
	}
	for fd := 0; ; fd++ {
		if !used[fd] {
			return fd
		}
	}
}
