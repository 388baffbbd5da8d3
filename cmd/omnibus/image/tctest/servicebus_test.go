package tctest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/azure/servicebus"
	"github.com/testcontainers/testcontainers-go/wait"
)

const config = `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[{"Name":"orders"}],
  "Topics":[{"Name":"events","Subscriptions":[{"Name":"audit"}]}]}],"Logging":{"Type":"Console"}}}`

// TestTestcontainersGo starts the image with servicebus.Run, as the
// module's own example starts the emulator, and uses the connection
// string it hands back with the Go SDK.
//
// The module always starts a SQL Server container beside the emulator and
// offers no way not to; Microsoft's SQL Server image cannot be pulled
// here, and omnibus needs none, so the test names omnibus's image for
// that slot too (WithMSSQL), waiting for its ready line instead of SQL
// Server's. What is under test, the servicebus container, is started and
// waited for by the module's own code: ports 5672 and 5300 listening and
// GET /health.
func TestTestcontainersGo(t *testing.T) {
	image := os.Getenv("OMNIBUS_IMAGE")
	if image == "" {
		t.Skip("OMNIBUS_IMAGE is unset: `make imagetest` builds the image and runs this test on it (CI does, with podman)")
	}
	startPodmanService(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	c, err := servicebus.Run(ctx, image,
		servicebus.WithAcceptEULA(),
		servicebus.WithConfig(strings.NewReader(config)),
		servicebus.WithMSSQL(image, testcontainers.WithWaitStrategy(wait.ForLog("Emulator Service is Successfully Up!"))))
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatalf("servicebus.Run: %v", err)
	}
	conn, err := c.ConnectionString(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("connection string: %s", conn)
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	for _, entity := range []string{"orders", "events"} {
		s, err := client.NewSender(entity, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("to " + entity)}, nil); err != nil {
			t.Fatalf("send to %s: %v", entity, err)
		}
	}
	for _, r := range []struct {
		open func() (*azservicebus.Receiver, error)
		want string
	}{
		{func() (*azservicebus.Receiver, error) { return client.NewReceiverForQueue("orders", nil) }, "to orders"},
		{func() (*azservicebus.Receiver, error) {
			return client.NewReceiverForSubscription("events", "audit", nil)
		}, "to events"},
	} {
		rcv, err := r.open()
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := rcv.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != r.want {
			t.Fatalf("received %v, %v; want %q", msgs, err, r.want)
		}
		if err := rcv.CompleteMessage(ctx, msgs[0], nil); err != nil {
			t.Fatal(err)
		}
	}
}

// startPodmanService serves podman's Docker-compatible API on a socket of
// the test's own and points testcontainers-go at it. Its containers run
// with runc and the rlimits this process has (crun refuses hybrid cgroup
// hierarchies, and a sandbox may forbid raising limits; see
// cmd/omnibus/README.md, "The image"); Ryuk, testcontainers' reaper, is
// off because its image cannot be pulled here: the test removes what it
// started itself.
func startPodmanService(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("OMNIBUS_IMAGE is set but podman is not installed: %v", err)
	}
	dir, err := os.MkdirTemp("", "omnibus-tctest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=32768:32768\"]\n", nofile.Max, nofile.Max)
	if _, err := exec.LookPath("runc"); err == nil {
		conf += "[engine]\nruntime = \"runc\"\n"
	}
	confPath := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "podman.sock")
	cmd := exec.Command(bin, "system", "service", "--time=0", "unix://"+sock)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+confPath)
	out, err := os.Create(filepath.Join(dir, "service.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("podman system service: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(out.Name())
			t.Fatalf("podman's API socket did not appear in 30 s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
}
