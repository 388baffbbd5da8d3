package bench

import (
	"testing"
	"time"
)

func TestParseMachineTimes(t *testing.T) {
	// A real /proc/stat head: user nice system idle iowait irq softirq
	// steal guest guest_nice, then the per-CPU lines.
	stat := []byte("cpu  3000 100 900 8000 200 50 50 700 0 0\ncpu0 1500 50 450 4000 100 25 25 350 0 0\nintr 1 2 3\n")
	m, err := parseMachineTimes(stat)
	if err != nil {
		t.Fatal(err)
	}
	want := machineTimes{busy: 41 * time.Second, idle: 82 * time.Second, steal: 7 * time.Second}
	if m != want {
		t.Errorf("parsed %+v, want %+v", m, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu  1 2 3\n", "cpu  1 2 3 4 5 6 7 x\n"} {
		if _, err := parseMachineTimes([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
	if _, err := readMachineTimes(); err != nil {
		t.Errorf("this machine's /proc/stat: %v", err)
	}
}
