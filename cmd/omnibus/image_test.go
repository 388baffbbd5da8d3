package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The image is tested the way Microsoft's emulator's users start theirs:
// Config.json mounted at the emulator's path, the SQL Server variables
// set, ports published, the emulator's connection string. `make
// imagetest` builds the image and runs these with OMNIBUS_IMAGE naming it.

const imageConfig = `{"UserConfig":{"Namespaces":[{"Name":"servicebus","Queues":[{"Name":"orders"}],
  "Topics":[{"Name":"events","Subscriptions":[{"Name":"all"}]}]}],"Logging":{"Type":"Console"}}}`

// maxCompressedImage is issue 25's bound on the image, gzip-compressed as
// registries store it.
const maxCompressedImage = 30 << 20

func TestImage(t *testing.T) {
	image := os.Getenv("OMNIBUS_IMAGE")
	if image == "" {
		t.Skip("OMNIBUS_IMAGE is unset: `make imagetest` builds the image and runs this test on it (CI does, with podman)")
	}
	p := newPodman(t)
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "Config.json")
	if err := os.WriteFile(cfg, []byte(imageConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfgDir, 0o755); err != nil { // the container's user reads it
		t.Fatal(err)
	}
	mount := cfg + ":/ServiceBus_Emulator/ConfigFiles/Config.json:ro"
	emulatorEnv := []string{"-e", "ACCEPT_EULA=Y", "-e", "SQL_SERVER=mssql", "-e", "MSSQL_SA_PASSWORD=Passw0rd!", "-e", "SQL_WAIT_INTERVAL=0"}

	t.Run("runs as the emulator does and keeps its data", func(t *testing.T) {
		volume := p.volume(t)
		c := p.run(t, append(append([]string{"-v", mount, "-v", volume + ":/data"}, emulatorEnv...), image)...)
		logs := c.waitFor(t, emulatorReadyLine)
		if !strings.Contains(logs, "needs no SQL Server") {
			t.Errorf("no line saying the SQL variables are ignored:\n%s", logs)
		}
		checkHealth(t, c.port(t, "5300"))
		amqp := c.port(t, "5672")
		// The connection string testcontainers-go's ConnectionString gives.
		conn := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;", amqp)
		sendBody(t, conn, "orders", "through the image")
		if got := receiveBody(t, conn, "orders"); got != "through the image" {
			t.Fatalf("received %q", got)
		}
		sendBody(t, conn, "orders", "kept across a restart")

		began := time.Now()
		out, err := p.cmd("stop", "-t", "10", c.name).CombinedOutput()
		if err != nil {
			t.Fatalf("podman stop: %v\n%s", err, out)
		}
		t.Logf("stopped in %v", time.Since(began).Round(time.Millisecond))
		if logs := c.logs(t); !strings.Contains(logs, "stopped cleanly") {
			t.Fatalf("no clean stop on SIGTERM:\n%s", logs)
		}
		if code := c.exitCode(t); code != 0 {
			t.Fatalf("exit code %d after a clean stop", code)
		}
		owner := p.volumeOwner(t, volume)
		if owner != 65532 {
			t.Errorf("the data volume's files belong to uid %d, want the image's user 65532", owner)
		}

		c2 := p.run(t, append(append([]string{"-v", mount, "-v", volume + ":/data"}, emulatorEnv...), image)...)
		c2.waitFor(t, emulatorReadyLine)
		conn2 := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;", c2.port(t, "5672"))
		if got := receiveBody(t, conn2, "orders"); got != "kept across a restart" {
			t.Fatalf("after a restart received %q", got)
		}
	})

	t.Run("non-root user", func(t *testing.T) {
		out, err := p.cmd("image", "inspect", "--format", "{{.Config.User}}", image).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "65532:65532" {
			t.Fatalf("image user %q (%v), want 65532:65532", out, err)
		}
	})

	t.Run("no writable data directory", func(t *testing.T) {
		dir := t.TempDir() // root's, 0755 as root made it: the image's user cannot write
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out, code := p.runToEnd(t, "-v", dir+":/data", image)
		if code == 0 || !strings.Contains(out, "is not writable") {
			t.Fatalf("exit %d, want non-zero saying /data is not writable:\n%s", code, out)
		}
	})

	t.Run("malformed Config.json", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "Config.json")
		if err := os.WriteFile(bad, []byte("{\"UserConfig\": {\n \"Namespaces\": [{\"Name\": \"n\", \"Queus\": []}]}}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(bad), 0o755); err != nil {
			t.Fatal(err)
		}
		out, code := p.runToEnd(t, "-v", bad+":/ServiceBus_Emulator/ConfigFiles/Config.json:ro", image)
		want := `line 2, column 31: unknown property "Queus"`
		if code == 0 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want non-zero saying %q:\n%s", code, want, out)
		}
	})

	t.Run("compressed size", func(t *testing.T) {
		archive := filepath.Join(t.TempDir(), "image.tar")
		if out, err := p.cmd("save", "--format", "oci-archive", "-o", archive, image).CombinedOutput(); err != nil {
			t.Fatalf("podman save: %v\n%s", err, out)
		}
		n := gzippedSize(t, archive)
		t.Logf("image: %.1f MB compressed", float64(n)/1e6)
		if n > maxCompressedImage {
			t.Fatalf("image is %d bytes compressed, more than %d", n, maxCompressedImage)
		}
	})
}

// podman runs the container CLI with the settings this machine needs:
// runc where installed (crun refuses hybrid cgroup v1/v2 hierarchies) and
// the rlimits the test already has (a sandbox may forbid raising them).
type podman struct {
	bin    string
	global []string
	limits []string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("OMNIBUS_IMAGE is set but podman is not installed: %v", err)
	}
	p := &podman{bin: bin}
	if _, err := exec.LookPath("runc"); err == nil {
		p.global = []string{"--runtime", "runc"}
	}
	var nofile, nproc syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Getrlimit(6 /* RLIMIT_NPROC */, &nproc)
	procs := min(nproc.Max, 32768) // higher is refused in some sandboxes
	p.limits = []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile.Max, nofile.Max),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", procs, procs)}
	return p
}

func (p *podman) cmd(args ...string) *exec.Cmd {
	return exec.Command(p.bin, append(append([]string{}, p.global...), args...)...)
}

// container is one started with run; it is removed when the test ends.
type container struct {
	p    *podman
	name string
}

func (p *podman) run(t *testing.T, args ...string) *container {
	t.Helper()
	name := fmt.Sprintf("omnibus-test-%d", rand.Uint64())
	full := append([]string{"run", "-d", "--name", name, "-p", "127.0.0.1::5672", "-p", "127.0.0.1::5300"}, p.limits...)
	out, err := p.cmd(append(full, args...)...).CombinedOutput()
	t.Cleanup(func() { _ = p.cmd("rm", "-f", "-t", "0", name).Run() })
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	return &container{p: p, name: name}
}

// runToEnd runs a container that should exit by itself and returns its
// output and exit code.
func (p *podman) runToEnd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	full := append(append(append([]string{}, p.global...), "run", "--rm"), p.limits...)
	cmd := exec.CommandContext(ctx, p.bin, append(full, args...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the container did not exit within a minute:\n%s", out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	return string(out), 0
}

func (p *podman) volume(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("omnibus-test-data-%d", rand.Uint64())
	if out, err := p.cmd("volume", "create", name).CombinedOutput(); err != nil {
		t.Fatalf("podman volume create: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = p.cmd("volume", "rm", "-f", name).Run() })
	return name
}

// volumeOwner is the uid owning the files omnibus wrote in a volume.
func (p *podman) volumeOwner(t *testing.T, volume string) uint32 {
	t.Helper()
	out, err := p.cmd("volume", "inspect", "--format", "{{.Mountpoint}}", volume).Output()
	if err != nil {
		t.Fatalf("podman volume inspect: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(strings.TrimSpace(string(out)), "omnibus-ca.pem"), &st); err != nil {
		t.Fatalf("the volume holds no omnibus-ca.pem: %v", err)
	}
	return st.Uid
}

func (c *container) logs(t *testing.T) string {
	t.Helper()
	out, err := c.p.cmd("logs", c.name).CombinedOutput()
	if err != nil {
		t.Fatalf("podman logs: %v\n%s", err, out)
	}
	return string(out)
}

// waitFor waits for a line in the container's log and returns the log.
func (c *container) waitFor(t *testing.T, line string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		logs := c.logs(t)
		if strings.Contains(logs, line) {
			return logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in a minute:\n%s", line, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// port is the host address a container port is published on.
func (c *container) port(t *testing.T, port string) string {
	t.Helper()
	out, err := c.p.cmd("port", c.name, port+"/tcp").Output()
	if err != nil {
		t.Fatalf("podman port: %v", err)
	}
	return strings.TrimSpace(strings.Split(string(out), "\n")[0])
}

func (c *container) exitCode(t *testing.T) int {
	t.Helper()
	out, err := c.p.cmd("inspect", "--format", "{{.State.ExitCode}}", c.name).Output()
	if err != nil {
		t.Fatalf("podman inspect: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("exit code %q: %v", out, err)
	}
	return n
}

func checkHealth(t *testing.T, addr string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("GET /health: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "healthy") {
		t.Fatalf("GET /health: %d %s", resp.StatusCode, body)
	}
}

func sendBody(t *testing.T, conn, queue, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := client.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func receiveBody(t *testing.T, conn, queue string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	receiver, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
	return string(msgs[0].Body)
}

func gzippedSize(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n countingWriter
	zw := gzip.NewWriter(&n)
	if _, err := io.Copy(zw, f); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
