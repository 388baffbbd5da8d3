package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFailingExt4ThroughTheBinary runs the binary on a real ext4 file
// system on a loop device and makes the file system fail under the
// official SDK's sends (trigger_fs_error: the journal aborts and the file
// system turns read-only, so the write-ahead log's writes and fsyncs
// fail). Every send in flight is answered (stored, com.microsoft:timeout
// or server-busy); SIGTERM then ends the process within the 5 s it
// promises, with exit status 1 and the fault in its last words; after
// e2fsck and a restart, every acknowledged message is there, but for the
// group commit that raced with the failure, which ext4 may lose although
// its fsync succeeded (see checkNoneLost).
func TestFailingExt4ThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	disk := newExt4Disk(t, 64<<20)
	data, args := damageArgs(t)
	data = filepath.Join(disk.dir, "data")
	args[1] = data // --data on the ext4 file system
	p := startBinary(t, bin, nil, args...)

	load := sendUntilTheDiskFails(t, connStr(p.amqp), disk.fail)
	if !p.logs.contains("store refuses writes") {
		t.Fatalf("the broker did not report the failed disk:\n%s", p.logs)
	}

	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The binary gives its shutdown 4.5 s; the rest is room for a loaded
	// machine to schedule it.
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit 10 s after SIGTERM on a failed disk:\n%s", p.logs)
	}
	err := p.cmd.Wait()
	took := time.Since(began)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit after SIGTERM on a failed disk: %v, want exit status 1:\n%s", err, p.logs)
	}
	last := lastLine([]byte(p.logs.String()))
	if !strings.Contains(last, "read-only file system") && !strings.Contains(last, "failed") {
		t.Fatalf("the last words do not name the fault: %s", last)
	}
	t.Logf("SIGTERM on the failed disk: exit status 1 after %v: %s", took.Round(time.Millisecond), last)

	disk.repairAndRemount()
	p = startBinary(t, bin, nil, args...)
	load.checkNoneLost(connStr(p.amqp), true)
}

// ext4Disk is a small ext4 file system in an image file, on a loop
// device, mounted with errors=remount-ro.
type ext4Disk struct {
	t        *testing.T
	img, dev string
	dir      string // where it is mounted
	mounted  bool
}

// newExt4Disk makes and mounts an ext4 file system of size bytes. It skips
// the test, saying why, where that needs what the machine does not give
// (root, loop devices, e2fsprogs), unless OMNIBUS_REQUIRE_ROOT_TESTS=1
// makes that a failure: CI runs as root with all three, and sets it. Every
// step is undone when the test ends, whatever happened.
func newExt4Disk(t *testing.T, size int64) *ext4Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		skipForWantOfRoot(t, "this test fails a real ext4 file system on a loop device, which needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipForWantOfRoot(t, fmt.Sprintf("this test fails a real ext4 file system on a loop device: %s is missing (e2fsprogs, util-linux)", tool))
		}
	}
	tmp := t.TempDir()
	d := &ext4Disk{t: t, img: filepath.Join(tmp, "ext4.img"), dir: filepath.Join(tmp, "mnt")}
	if err := os.WriteFile(d.img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.img, size); err != nil {
		t.Fatal(err)
	}
	d.run("mkfs.ext4", "-q", "-F", d.img)
	out, err := exec.Command("losetup", "--find", "--show", d.img).CombinedOutput()
	if err != nil {
		skipForWantOfRoot(t, fmt.Sprintf("this test fails a real ext4 file system on a loop device, and none could be set up (%v: %s); it needs root and /dev/loop*",
			err, bytes.TrimSpace(out)))
	}
	d.dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", d.dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", d.dev, err, out)
		}
	})
	if err := os.Mkdir(d.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.mount()
	t.Cleanup(d.unmount) // before the loop device is detached
	if _, err := os.Stat(d.trigger()); err != nil {
		skipForWantOfRoot(t, fmt.Sprintf("this test fails a real ext4 file system, and this kernel has no %s to do it with", d.trigger()))
	}
	return d
}

// skipForWantOfRoot skips the test, saying why, unless
// OMNIBUS_REQUIRE_ROOT_TESTS=1 says this machine is meant to run it (as CI
// is): then it fails it.
func skipForWantOfRoot(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(requireRootTestsEnv) == "1" {
		t.Fatalf("%s, and %s=1 says this machine has it (CI runs as root: .ci/run sets it)", why, requireRootTestsEnv)
	}
	t.Skipf("%s, as CI has (where %s=1 makes this skip a failure)", why, requireRootTestsEnv)
}

// trigger is the file that makes the file system fail.
func (d *ext4Disk) trigger() string {
	return filepath.Join("/sys/fs/ext4", filepath.Base(d.dev), "trigger_fs_error")
}

// fail makes the file system fail as a dying disk would: ext4 aborts its
// journal and, with errors=remount-ro, turns read-only.
func (d *ext4Disk) fail() {
	if err := os.WriteFile(d.trigger(), []byte("1"), 0); err != nil {
		d.t.Fatalf("trigger_fs_error: %v", err)
	}
}

// repairAndRemount unmounts the failed file system, repairs it with
// e2fsck (replaying its journal) and mounts it again.
func (d *ext4Disk) repairAndRemount() {
	d.unmount()
	out, err := exec.Command("e2fsck", "-f", "-y", d.img).CombinedOutput()
	var exit *exec.ExitError
	// 1 and 2: errors corrected; the file system recorded one.
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() > 2) {
		d.t.Fatalf("e2fsck: %v: %s", err, out)
	}
	d.mount()
}

func (d *ext4Disk) mount() {
	d.run("mount", "-o", "errors=remount-ro", d.dev, d.dir)
	d.mounted = true
}

func (d *ext4Disk) unmount() {
	if !d.mounted {
		return
	}
	if out, err := exec.Command("umount", d.dir).CombinedOutput(); err != nil {
		d.t.Errorf("umount %s: %v: %s", d.dir, err, out)
		return
	}
	d.mounted = false
}

func (d *ext4Disk) run(name string, args ...string) {
	d.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		d.t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
