package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestOneSchedulerThreadBelowOneCore runs the broker in a cgroup (v1)
// allowed half a core, and finds it on one P (the Prometheus metric of
// runtime.GOMAXPROCS, and the start-up line saying why); GOMAXPROCS in
// the environment wins over it; without a limit the runtime's own count
// stands (cmd/internal/cli/procs.go).
func TestOneSchedulerThreadBelowOneCore(t *testing.T) {
	bin := buildBinary(t)
	const hierarchy = "/sys/fs/cgroup/cpu"
	if os.Geteuid() != 0 {
		skipForWantOfRoot(t, "this test holds the broker to half a core with a cgroup, which needs root")
	}
	if _, err := os.Stat(filepath.Join(hierarchy, "cpu.cfs_quota_us")); err != nil {
		skipForWantOfRoot(t, fmt.Sprintf("this test holds the broker to half a core with a cgroup v1 CPU quota, and this machine has no %s (%v)", hierarchy, err))
	}
	cg := filepath.Join(hierarchy, fmt.Sprintf("omnibus-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		skipForWantOfRoot(t, fmt.Sprintf("this test holds the broker to half a core with a cgroup, and none could be made: %v", err))
	}
	t.Cleanup(func() { // after the broker's own cleanup killed it
		if err := os.Remove(cg); err != nil {
			t.Errorf("removing the test's cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(cg, "cpu.cfs_quota_us"), []byte("50000"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OMNIBUS_MEMORY=true", "OMNIBUS_AMQP_ADDR=127.0.0.1:0", "OMNIBUS_HTTP_ADDR=-", "OMNIBUS_HTTPS_ADDR=-", "OMNIBUS_AMQPS_ADDR=-"}
	// The shell puts itself into the cgroup, then becomes the broker.
	inCgroup := []string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg, bin}

	held := startBinary(t, "/bin/sh", env, inCgroup...)
	if got := gomaxprocs(t, held); got != 1 {
		t.Errorf("held to half a core: GOMAXPROCS %d, want 1\n%s", got, held.logs)
	}
	if !strings.Contains(held.logs.String(), `"gomaxprocs": "1 (the cgroup allows 0.50 cores: `) {
		t.Errorf("the start-up line does not say why GOMAXPROCS is 1:\n%s", held.logs)
	}

	told := startBinary(t, "/bin/sh", append(env, "GOMAXPROCS=2"), inCgroup...)
	if got := gomaxprocs(t, told); got != 2 {
		t.Errorf("held to half a core with GOMAXPROCS=2 in the environment: GOMAXPROCS %d, want 2\n%s", got, told.logs)
	}

	// The broker inherits the test's environment, GOMAXPROCS included, and
	// the test runs under no CPU limit below one core: its count is the
	// runtime's own.
	free := startBinary(t, bin, env)
	if got, want := gomaxprocs(t, free), runtime.GOMAXPROCS(0); got != want {
		t.Errorf("without a limit: GOMAXPROCS %d, want the runtime's %d\n%s", got, want, free.logs)
	}
}

var (
	metricsURLRE = regexp.MustCompile(`"metrics": "([^"]+)"`)
	gomaxprocsRE = regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\d+)$`)
)

// gomaxprocs reads the broker's go_sched_gomaxprocs_threads metric.
func gomaxprocs(t *testing.T, p *proc) int {
	t.Helper()
	m := metricsURLRE.FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no metrics address in the ready line:\n%s", p.logs)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	v := gomaxprocsRE.FindSubmatch(body)
	if v == nil {
		t.Fatalf("no go_sched_gomaxprocs_threads in the metrics:\n%s", body)
	}
	n, _ := strconv.Atoi(string(v[1]))
	return n
}
