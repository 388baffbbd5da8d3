package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEmulatorContract starts the binary the way the tools that start
// Microsoft's emulator do (its SQL Server variables set, the EULA
// accepted) and checks what they wait for: the emulator's ready line,
// after omnibus is ready, and a start that ignores the variables, saying
// so once, and warns about an OMNIBUS_ variable that names no flag.
func TestEmulatorContract(t *testing.T) {
	bin := buildBinary(t)
	env := []string{"ACCEPT_EULA=Y", "SQL_SERVER=sqlserver", "MSSQL_SA_PASSWORD=Passw0rd!", "SQL_WAIT_INTERVAL=0", "OMNIBUS_NOT_A_FLAG=1"}
	p := startBinary(t, bin, env, "--memory", "--amqp-addr", "127.0.0.1:0", "--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-")
	if !p.logs.contains(emulatorReadyLine) {
		t.Fatalf("no %q line:\n%s", emulatorReadyLine, p.logs)
	}
	logs := p.logs.String()
	if strings.Index(logs, emulatorReadyLine) < strings.Index(logs, "omnibus is ready") {
		t.Errorf("the emulator's ready line comes before omnibus is ready:\n%s", logs)
	}
	if strings.Count(logs, "needs no SQL Server") != 1 ||
		!strings.Contains(logs, `"ACCEPT_EULA", "MSSQL_SA_PASSWORD", "SQL_SERVER", "SQL_WAIT_INTERVAL"`) {
		t.Errorf("want one line naming the four ignored variables:\n%s", logs)
	}
	if !strings.Contains(logs, "name no flag") || !strings.Contains(logs, "OMNIBUS_NOT_A_FLAG") {
		t.Errorf("want a warning about OMNIBUS_NOT_A_FLAG:\n%s", logs)
	}
}

// TestEmulatorConfigPath: the mount point is read when a file is there,
// skipped when nothing is, and a directory there is an error.
func TestEmulatorConfigPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := emulatorConfig(file); got != file || err != nil {
		t.Errorf("file: %q, %v", got, err)
	}
	if got, err := emulatorConfig(filepath.Join(dir, "missing.json")); got != "" || err != nil {
		t.Errorf("missing: %q, %v", got, err)
	}
	if _, err := emulatorConfig(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
}

// TestBadConfigFailsTheStartWithItsLine: a malformed Config.json ends the
// process non-zero, naming the file, the line and the property.
func TestBadConfigFailsTheStartWithItsLine(t *testing.T) {
	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "Config.json")
	bad := "{\"UserConfig\": {\n  \"Namespaces\": [{\"Name\": \"n\", \"Queues\": [{\"Name\": \"q\",\n    \"Propertys\": {}}]}],\n  \"Logging\": {\"Type\": \"Console\"}}}"
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--config", cfg, "--memory", "--amqp-addr", "127.0.0.1:0", "--http-addr", "-",
		"--https-addr", "-", "--amqps-addr", "-", "--metrics-addr", "-").CombinedOutput()
	if err == nil {
		t.Fatalf("started on a bad config:\n%s", out)
	}
	want := cfg + `: emuconfig: line 3, column 5: unknown property "Propertys" in UserConfig.Namespaces[0].Queues[0]`
	if !strings.Contains(string(out), want) {
		t.Fatalf("output does not say %q:\n%s", want, out)
	}
}

// TestUnwritableDataDirectory: started without a writable data directory
// (an image without its volume at /data), omnibus says so and exits
// non-zero. As root the check runs the binary as nobody, since root may
// write anywhere.
func TestUnwritableDataDirectory(t *testing.T) {
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o555); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--data", data, "--amqp-addr", "127.0.0.1:0", "--http-addr", "-",
		"--https-addr", "-", "--amqps-addr", "-", "--metrics-addr", "-")
	if os.Getuid() == 0 {
		// nobody must be able to run the binary and reach the directory.
		for _, p := range []string{filepath.Dir(bin), filepath.Dir(data), filepath.Dir(filepath.Dir(data))} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(out.String(), "is not writable") || !strings.Contains(out.String(), "/data") {
			t.Fatalf("exit %v, want a failure saying the directory is not writable:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 30 s after start on an unwritable data directory:\n%s", out.String())
	}
}

func TestVersion(t *testing.T) {
	var b bytes.Buffer
	printVersion(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "omnibus ") || !strings.HasPrefix(lines[1], "commit ") || !strings.HasPrefix(lines[2], "go1.") {
		t.Fatalf("--version printed:\n%s", b.String())
	}
}
