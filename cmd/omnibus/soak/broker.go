package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/cmd/internal/loopback"
)

// The entities the soak loads: a queue, or a topic with subscriptions.
const (
	queueName = "soak"
	topicName = "soak-topic"
)

// keyName is the SAS rule the broker is started with; its key is made
// per run (never the well-known default one).
const keyName = "RootManageSharedAccessKey"

// entityProps keep a soak's messages from running out of deliveries
// (each kill raises the delivery count of every message locked at that
// moment; none is meant to be dead-lettered in a soak), with a
// one-minute lock.
const entityProps = `{"MaxDeliveryCount":1000000,"LockDuration":"PT1M"}`

// soakConfig is the broker's Config.json: the queue, and the topic with
// subscriptions s1…sN.
func soakConfig(subscriptions int) string {
	var subs []string
	for i := range max(subscriptions, 1) {
		subs = append(subs, fmt.Sprintf(`{"Name":%q,"Properties":%s}`, subscriptionName(i), entityProps))
	}
	return `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns",` +
		`"Queues":[{"Name":"` + queueName + `","Properties":` + entityProps + `}],` +
		`"Topics":[{"Name":"` + topicName + `","Subscriptions":[` + strings.Join(subs, ",") + `]}]` +
		`}],"Logging":{"Type":"Console"}}}`
}

// subscriptionName is the name of the i-th subscription (0-based).
func subscriptionName(i int) string { return fmt.Sprintf("s%d", i+1) }

// startMark begins what the broker's log holds of each start.
const startMark = "==== soak: starting"

// broker is the omnibus process under test: started on the same data
// directory and address every time, killed with SIGKILL.
type broker struct {
	bin     string
	args    []string
	addr    string // host:port of the AMQP listener, the same on every start
	key     string
	logPath string
	log     *os.File // the broker's output, appended over every start

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// newBroker prepares dir (data directory, Config.json, log) for bin. With
// diskFaults, the broker fails its log's fsyncs on SIGUSR1 (see failDisk).
func newBroker(bin string, extra []string, dir, key string, subscriptions int, diskFaults bool) (*broker, error) {
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(soakConfig(subscriptions)), 0o644); err != nil {
		return nil, err
	}
	addr, err := loopback.FreeAddr() // the same on every start
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "broker.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"serve",
		"--data", filepath.Join(dir, "data"), "--config", cfg, "--amqp-addr", addr,
		"--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-", "--metrics-addr", "127.0.0.1:0", "--key-name", keyName, "--key", key}
	if diskFaults {
		args = append(args, "--fail-fsync-on-sigusr1")
	}
	return &broker{bin: bin, addr: addr, key: key, logPath: logPath, log: log, args: append(args, extra...)}, nil
}

// start runs the broker; it does not wait for it to be ready.
func (b *broker) start() error {
	fmt.Fprintf(b.log, "\n%s %s at %s\n", startMark, b.bin, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(b.bin, b.args...)
	cmd.Stdout, cmd.Stderr = b.log, b.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the broker: %w", err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	return nil
}

// waitReady waits until the broker accepts an AMQP connection (SASL and
// open answered) and returns how long after since that was. It fails if
// the process exits first or timeout passes.
func (b *broker) waitReady(ctx context.Context, since time.Time, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		attempt, stop := context.WithTimeout(ctx, time.Second)
		c, err := b.dial(attempt)
		stop()
		if err == nil {
			took := time.Since(since)
			c.Close()
			return took, nil
		}
		select {
		case <-b.exited:
			return 0, fmt.Errorf("the broker exited while starting (%v); the end of %s:\n%s", b.cmd.ProcessState, b.logPath, b.lastStartLog())
		case <-ctx.Done():
			return 0, fmt.Errorf("the broker accepted no connection within %s: %w (see %s)", timeout, err, b.logPath)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// lastStartLog is what the broker wrote since its last start, at most its
// last 4 KiB: a broker that failed to start says why there, and a test's
// temporary directory, log included, is gone once the test ends.
func (b *broker) lastStartLog() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return err.Error()
	}
	if i := bytes.LastIndex(data, []byte(startMark)); i >= 0 {
		data = data[i:]
	}
	if len(data) > 4<<10 {
		data = data[len(data)-4<<10:]
	}
	return string(data)
}

// dial opens an AMQP connection to the broker.
func (b *broker) dial(ctx context.Context) (*amqp.Conn, error) {
	return amqp.Dial(ctx, "amqp://"+b.addr, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(keyName, b.key)})
}

// kill ends the broker with SIGKILL and waits until it is gone.
func (b *broker) kill() error {
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	<-b.exited
	return nil
}

// failDisk makes the broker's disk fail: every later fsync of its
// write-ahead log fails (--fail-fsync-on-sigusr1).
func (b *broker) failDisk() error {
	fmt.Fprintf(b.log, "\n==== soak: failing the disk (SIGUSR1) at %s\n", time.Now().Format(time.RFC3339Nano))
	if err := b.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("SIGUSR1: %w", err)
	}
	return nil
}

// terminate ends the broker with SIGTERM and returns how long it took to
// exit and its exit status. A broker still running after timeout is
// killed, and terminate fails.
func (b *broker) terminate(timeout time.Duration) (time.Duration, int, error) {
	t0 := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, 0, fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-b.exited:
		return time.Since(t0), b.cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		_ = b.kill()
		return time.Since(t0), b.cmd.ProcessState.ExitCode(), fmt.Errorf("the broker did not exit within %s of SIGTERM (killed; see %s)", timeout, b.logPath)
	}
}

// running reports whether the broker process is alive.
func (b *broker) running() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// stop ends the broker cleanly (SIGTERM), or with SIGKILL after 30 s.
func (b *broker) stop() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		_ = b.kill()
	}
	b.log.Close()
}
