package membudget

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestTryAcquireRefusesPastTheLimit(t *testing.T) {
	b := New(100)
	if !b.TryAcquire(AMQPTransaction, 60) || !b.TryAcquire(AMQPTransaction, 40) {
		t.Fatal("100 bytes of a 100-byte budget refused")
	}
	if b.TryAcquire(AMQPTransaction, 1) {
		t.Fatal("a byte past the limit was taken")
	}
	if !b.Over() || b.Available() != 0 {
		t.Fatalf("Over = %v, Available = %d at the limit", b.Over(), b.Available())
	}
	b.Acquire(50) // already in memory: counted whatever the limit
	if b.Used() != 150 {
		t.Fatalf("Used = %d, want 150", b.Used())
	}
	b.Release(150)
	if b.Used() != 0 || b.Over() {
		t.Fatalf("after release: Used = %d, Over = %v", b.Used(), b.Over())
	}
	if got := b.Refused()["amqp-transaction"]; got != 1 {
		t.Fatalf("refusals = %d, want 1", got)
	}
}

// Many holders taking and giving back at once never go past the limit
// with TryAcquire, and end at zero.
func TestConcurrentHoldersStayUnderTheLimit(t *testing.T) {
	b := New(1000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10000 {
				if b.TryAcquire(HTTPAnswer, 300) {
					if u := b.Used(); u > 1000 {
						t.Errorf("Used = %d past the limit", u)
					}
					b.Release(300)
				}
			}
		})
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Fatalf("Used = %d after every release", b.Used())
	}
}

func TestNotifyWhenFree(t *testing.T) {
	b := New(10)
	b.Acquire(10)
	woke := make(chan struct{})
	b.NotifyWhenFree(func() { close(woke) })
	select {
	case <-woke:
		t.Fatal("woken while the budget is full")
	default:
	}
	b.Release(1)
	<-woke // fails by timing out when the release does not wake it
	done := make(chan struct{})
	b.NotifyWhenFree(func() { close(done) }) // room now: at once
	<-done
}

func TestNilBudgetBoundsNothing(t *testing.T) {
	var b *Budget
	if !b.TryAcquire(ConsolePage, 1<<50) || b.Over() || b.Used() != 0 {
		t.Fatal("a nil budget refused or counted")
	}
	b.Acquire(5)
	b.Release(5)
}

// A large peak that drains below an eighth of it is trimmed: the freed
// memory goes back to the OS.
func TestTrimAfterBurst(t *testing.T) {
	b := New(1 << 40)
	trimmed := make(chan struct{}, 1)
	b.trim = func() { trimmed <- struct{}{} }
	b.Acquire(trimAbove * 2)
	b.Release(trimAbove)
	select {
	case <-trimmed:
		t.Fatal("trimmed with half the peak still held")
	case <-time.After(2 * trimDelay):
	}
	b.Release(trimAbove)
	select {
	case <-trimmed:
	case <-time.After(10 * trimDelay):
		t.Fatal("no trim after the burst drained")
	}
}

func writeFile(t *testing.T, root, name, data string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMachineMemory(t *testing.T) {
	const meminfo = "MemTotal:       24576000 kB\nMemFree:        1000 kB\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		src   string
	}{
		{"no cgroup", map[string]string{"proc/meminfo": meminfo}, 24576000 << 10, "MemTotal"},
		{"v2 unlimited", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n"}, 24576000 << 10, "MemTotal"},
		{"v2 limit on the parent", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/pod/app\n",
			"sys/fs/cgroup/pod/app/memory.max": "max\n", "sys/fs/cgroup/pod/memory.max": "2147483648\n"},
			2 << 30, "/sys/fs/cgroup/pod/memory.max"},
		{"v1", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "12:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n",
			"sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes": "536870912\n"}, 512 << 20,
			"/sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes"},
		{"v1 unlimited", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 24576000 << 10, "MemTotal"},
		{"cgroup above MemTotal", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n",
			"sys/fs/cgroup/memory.max": "99999999999999\n"}, 24576000 << 10, "MemTotal"},
		{"nothing", map[string]string{}, fallbackMemory, "assumed 4 GiB (no /proc/meminfo)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, data := range tc.files {
				writeFile(t, root, name, data)
			}
			got, src := machineMemory(root)
			if got != tc.want || src != tc.src {
				t.Fatalf("machineMemory = %d from %q, want %d from %q", got, src, tc.want, tc.src)
			}
		})
	}
}
