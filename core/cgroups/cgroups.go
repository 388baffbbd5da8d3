// Package cgroups reads the limits this process's control groups put on
// it, v2 and v1 alike: the memory it may use (core/membudget sizes its
// default budget from it) and the CPU time it may take (the broker runs
// one scheduler thread under a budget below one core). A limit is looked
// for on the process's own cgroup and on each of its ancestors, and the
// lowest wins, as the kernel enforces every level.
package cgroups

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Files returns the files, relative to root (a directory standing for
// /), that may hold a limit on this process: v2name in its v2 cgroup
// and every ancestor, and v1name in the v1 hierarchy of v1controller
// (mounted at sys/fs/cgroup/<v1controller>) likewise. Whether each
// exists is the caller's to find out; none when /proc/self/cgroup cannot
// be read.
func Files(root, v2name, v1controller, v1name string) []string {
	data, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return nil
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			for _, dir := range ancestors(parts[2]) {
				files = append(files, path.Join("sys/fs/cgroup", dir, v2name))
			}
		case slices.Contains(strings.Split(parts[1], ","), v1controller): // v1
			for _, dir := range ancestors(parts[2]) {
				files = append(files, path.Join("sys/fs/cgroup", v1controller, dir, v1name))
			}
		}
	}
	return files
}

// ancestors returns p and each of its parents up to "/".
func ancestors(p string) []string {
	p = path.Clean("/" + p)
	out := []string{p}
	for p != "/" {
		p = path.Dir(p)
		out = append(out, p)
	}
	return out
}
