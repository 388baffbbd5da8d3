package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCPULimit(t *testing.T) {
	// This machine's own layout: v1 controllers beside an empty v2 line.
	const hybrid = "12:cpu,cpuacct:/omnibus/x\n4:memory:/omnibus/x\n0::/omnibus/x\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		cores float64
		where string
	}{
		{"no cgroup file", map[string]string{}, 0, ""},
		{"v2 unlimited", map[string]string{"proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/cpu.max": "max 100000\n"}, 0, ""},
		{"v2 half a core", map[string]string{"proc/self/cgroup": "0::/app\n",
			"sys/fs/cgroup/app/cpu.max": "50000 100000\n"}, 0.5, "/sys/fs/cgroup/app/cpu.max"},
		{"v2 the parent lower", map[string]string{"proc/self/cgroup": "0::/pod/app\n",
			"sys/fs/cgroup/pod/app/cpu.max": "150000 100000\n", "sys/fs/cgroup/pod/cpu.max": "25000 100000\n"},
			0.25, "/sys/fs/cgroup/pod/cpu.max"},
		{"v1 a fifth", map[string]string{"proc/self/cgroup": hybrid,
			"sys/fs/cgroup/cpu/omnibus/x/cpu.cfs_quota_us":  "2000\n",
			"sys/fs/cgroup/cpu/omnibus/x/cpu.cfs_period_us": "10000\n"}, 0.2, "/sys/fs/cgroup/cpu/omnibus/x/cpu.cfs_quota_us"},
		{"v1 unlimited", map[string]string{"proc/self/cgroup": hybrid,
			"sys/fs/cgroup/cpu/omnibus/x/cpu.cfs_quota_us":  "-1\n",
			"sys/fs/cgroup/cpu/omnibus/x/cpu.cfs_period_us": "100000\n"}, 0, ""},
		{"v1 quota without a period", map[string]string{"proc/self/cgroup": hybrid,
			"sys/fs/cgroup/cpu/omnibus/x/cpu.cfs_quota_us": "50000\n"}, 0, ""},
		{"v1 in a container (the mount is its own cgroup)", map[string]string{"proc/self/cgroup": "3:cpu,cpuacct:/docker/abc\n",
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"},
			1.5, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"},
		{"a memory-only v1 line is not a CPU limit", map[string]string{"proc/self/cgroup": "4:memory:/x\n",
			"sys/fs/cgroup/memory/x/cpu.cfs_quota_us": "1000\n", "sys/fs/cgroup/memory/x/cpu.cfs_period_us": "100000\n"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cores, where := CPULimit(writeFiles(t, tc.files))
			if cores != tc.cores || where != tc.where {
				t.Fatalf("CPULimit = %v from %q, want %v from %q", cores, where, tc.cores, tc.where)
			}
		})
	}
}
