package main

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalDuringAStuckStart stops a broker whose start cannot finish
// (its config file is a FIFO nobody writes, so reading it blocks, as a
// store stuck on its disk would) with SIGTERM: the process must end and
// say why, instead of ignoring the signal until the start is done.
func TestSignalDuringAStuckStart(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "Config.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", fifo, "--memory", "--amqp-addr", "127.0.0.1:0", "--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-",
		"--metrics-addr", "127.0.0.1:0")
	out := &logBuffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	starting := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.add(sc.Text())
			if strings.Contains(sc.Text(), "omnibus is starting") {
				close(starting)
			}
		}
		done <- cmd.Wait()
	}()
	// The line is logged once SIGTERM is handled; before, the signal would
	// kill the process by default, proving nothing.
	select {
	case <-starting:
	case err := <-done:
		t.Fatalf("exited before it was stopped: %v\n%s", err, out)
	case <-time.After(time.Minute):
		t.Fatalf("not starting after a minute:\n%s", out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(out.String(), "during start-up") {
			t.Fatalf("exit %v, want a failure saying it was stopped during start-up:\n%s", err, out)
		}
		t.Logf("%v: %s", err, lastLine([]byte(out.String())))
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after SIGTERM during a stuck start:\n%s", out)
	}
}

// lastLine returns the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
