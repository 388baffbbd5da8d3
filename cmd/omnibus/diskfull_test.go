package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core/sas"
)

// The conditions Service Bus refuses a send with when it cannot store it:
// the broker is busy, or the namespace or entity is full.
var fullDiskConditions = []string{"com.microsoft:server-busy", "amqp:resource-limit-exceeded"}

const diskConfig = `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[{"Name":"q","Properties":{"MaxSizeInMegabytes":5120}}]}],"Logging":{"Type":"Console"}}}`

// TestDiskFullThroughTheBinary fills a real 64 MiB file system under the
// broker with the official SDK's sends, 8 at a time. With the default
// reserve, sends are refused with Service Bus's error before the disk is
// full, every send is answered, the broker does not exit, receives and
// completions go on, sends resume once space returns, and nothing
// acknowledged is lost. Then the broker is killed and restarted on a disk
// filled to the last byte: it fails at once with the reason and changes
// nothing, and starts with every acknowledged message once space returns.
func TestDiskFullThroughTheBinary(t *testing.T) {
	d := newDiskTest(t) // the default reserve: an eighth of the disk
	d.fillUntilRefused()
	d.checkRunning()
	// Pebble's clean-up after the last flushes may give a few MiB back;
	// the other program takes them, leaving 2 MiB, so that what follows
	// meets a disk below the reserve whatever the timing.
	d.squeeze(2 << 20)
	// The store reads the free space every 250 ms: wait until it has.
	d.checkHealth(http.StatusServiceUnavailable, "no space left")
	d.checkRESTSendRefused()

	// Receives and completions go on.
	recv, err := d.client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := recv.ReceiveMessages(d.ctx, 20, nil)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("receive on a full disk: %d messages, %v", len(msgs), err)
	}
	for _, m := range msgs {
		if err := recv.CompleteMessage(d.ctx, m, nil); err != nil {
			t.Fatalf("complete on a full disk: %v", err)
		}
		d.completed[m.MessageID] = true
	}
	// A send is still refused, unless Pebble's own clean-up (a log file
	// deleted after a flush) has given the disk back enough meanwhile.
	if err := d.send("after-completions"); err == nil {
		d.acked["after-completions"] = true
	} else if !slices.Contains(fullDiskConditions, amqpCondition(err)) {
		t.Fatalf("a send after the completions: %v, want it stored or refused as before", err)
	}

	// Space returns: the other program's file is removed.
	d.removeBallast()
	freed := time.Now()
	for i := 0; ; i++ {
		id := fmt.Sprintf("after-%d", i)
		if err := d.send(id); err == nil {
			d.acked[id] = true
			break
		} else if !slices.Contains(fullDiskConditions, amqpCondition(err)) {
			t.Fatalf("send while waiting for space: %v", err)
		}
		if time.Since(freed) > time.Minute {
			t.Fatal("sends still refused a minute after space returned")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("sends accepted again %v after space returned", time.Since(freed).Round(time.Millisecond))
	d.checkHealth(http.StatusOK, `"status":"healthy"`)

	// Kill the broker, fill the disk to the last byte, start it again: it
	// fails at once, saying why, and leaves the directory as it was.
	d.kill()
	filled := fillDisk(t, d.ballast)
	before := listDir(t, d.data)
	startedAt := time.Now()
	out, err := exec.Command(d.bin, d.args...).CombinedOutput()
	took := time.Since(startedAt)
	if err == nil || !strings.Contains(string(out), "no space left") {
		t.Fatalf("start on a full disk: %v, want a failure saying no space left:\n%s", err, out)
	}
	if after := listDir(t, d.data); !slices.Equal(before, after) {
		t.Fatalf("the failed start changed the data directory:\n before %v\n after  %v", before, after)
	}
	t.Logf("start on a full disk (%d MiB of ballast) failed in %v: %s", filled>>20, took.Round(time.Millisecond), lastLine(out))

	d.removeBallast()
	d.restartAndCheck()
}

// TestDiskFullPastTheReserve fills the disk with no reserve, so that
// Pebble itself meets the full disk (a write of its log or of a flush
// fails with ENOSPC). The write is retried rather than failed: sends are
// refused, the broker does not exit, SIGTERM stops it at once although a
// write is still blocked, and after the restart (space returned) nothing
// acknowledged is lost.
func TestDiskFullPastTheReserve(t *testing.T) {
	d := newDiskTest(t, "--disk-reserve", "0")
	d.fillUntilRefused()
	d.checkRunning()
	if !d.proc.logs.contains("store refuses writes") {
		t.Fatalf("no warning logged for the full disk:\n%s", d.proc.logs)
	}

	if err := d.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.proc.done:
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after SIGTERM on a full disk:\n%s", d.proc.logs)
	}
	_ = d.proc.cmd.Wait()
	t.Logf("SIGTERM on a full disk: %s", lastLine([]byte(d.proc.logs.String())))

	d.removeBallast()
	d.restartAndCheck()
}

// diskTest is a broker binary on a 64 MiB tmpfs, with an 8 MiB file of
// another program's on it, and the messages acknowledged so far.
type diskTest struct {
	t                *testing.T
	ctx              context.Context
	disk, data       string
	ballast          string
	bin              string
	args             []string
	http             string // the REST gateway's address
	proc             *proc
	client           *azservicebus.Client
	sender           *azservicebus.Sender
	body             []byte
	mu               sync.Mutex      // guards acked while senders run
	acked, completed map[string]bool // by message ID
}

func newDiskTest(t *testing.T, flags ...string) *diskTest {
	bin := buildBinary(t)
	d := &diskTest{t: t, disk: mountTmpfs(t, "64m"), bin: bin,
		body:  bytes.Repeat([]byte("omnibus "), 1024), // 8 KiB
		acked: map[string]bool{}, completed: map[string]bool{}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	d.ctx = ctx
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(diskConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	d.data = filepath.Join(d.disk, "data")
	d.ballast = filepath.Join(d.disk, "ballast")
	if out, err := exec.Command("fallocate", "-l", "8MiB", d.ballast).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v: %s", err, out)
	}
	d.args = append([]string{"--data", d.data, "--config", cfg,
		"--amqp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--https-addr", "-", "--amqps-addr", "-", "--metrics-addr", "127.0.0.1:0"}, flags...)
	d.start()
	return d
}

// start runs the binary and connects a sender that does not retry.
func (d *diskTest) start() {
	d.proc = startBinary(d.t, d.bin, nil, d.args...)
	m := httpAddrRE.FindStringSubmatch(d.proc.logs.String())
	if m == nil {
		d.t.Fatalf("no HTTP address in the ready line:\n%s", d.proc.logs)
	}
	d.http = m[1]
	noRetry := &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}}
	c, err := azservicebus.NewClientFromConnectionString(connStr(d.proc.amqp), noRetry)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = c.Close(context.Background()) })
	d.client = c
	if d.sender, err = c.NewSender("q", nil); err != nil {
		d.t.Fatal(err)
	}
}

func (d *diskTest) send(id string) error {
	return d.sender.SendMessage(d.ctx, &azservicebus.Message{MessageID: &id, Body: d.body}, nil)
}

// fillUntilRefused sends from 8 goroutines until each has had a send
// refused. Every send must be answered: stored, or refused with Service
// Bus's error for a full disk.
func (d *diskTest) fillUntilRefused() {
	t := d.t
	const senders = 8
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for w := range senders {
		wg.Go(func() {
			for i := 0; ; i++ {
				if i > 5000 {
					errs <- fmt.Errorf("sender %d: %d sends of 8 KiB, none refused", w, i)
					return
				}
				id := fmt.Sprintf("%d-%d", w, i)
				err := d.send(id)
				if err == nil {
					d.mu.Lock()
					d.acked[id] = true
					d.mu.Unlock()
					continue
				}
				if cond := amqpCondition(err); !slices.Contains(fullDiskConditions, cond) {
					errs <- fmt.Errorf("send %s refused with %v (condition %q), want one of %v", id, err, cond, fullDiskConditions)
				}
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("the 64 MiB disk (8 MiB of it another program's) took %d messages (%d MiB of bodies) in %v before sends were refused; %.1f MiB free then",
		len(d.acked), len(d.acked)*len(d.body)>>20, time.Since(start).Round(time.Millisecond), float64(freeBytes(t, d.disk))/(1<<20))
}

var httpAddrRE = regexp.MustCompile(`"http": "([^"]+)"`)

// checkRESTSendRefused sends one message through the REST gateway and
// expects Service Bus's status for a store that cannot take it: 503
// (server busy) or 403 (quota exceeded).
func (d *diskTest) checkRESTSendRefused() {
	t := d.t
	url := "http://" + d.http + "/q/messages"
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, url, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sas.Sign("http://"+d.http+"/q", "RootManageSharedAccessKey", "SAS_KEY_VALUE", time.Now().Add(time.Hour)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusForbidden {
		t.Fatalf("REST send on a full disk: %d %s, want 503 or 403", resp.StatusCode, body)
	}
	t.Logf("REST send on a full disk: %d %s", resp.StatusCode, bytes.TrimSpace(body))
}

// checkHealth waits until GET /health answers status with a body that
// contains want, failing the test after a minute.
func (d *diskTest) checkHealth(status int, want string) {
	t := d.t
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + d.http + "/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == status && strings.Contains(string(body), want) {
			t.Logf("GET /health: %d %s", resp.StatusCode, bytes.TrimSpace(body))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /health: %d %s, want %d with %q", resp.StatusCode, body, status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkRunning fails the test if the broker exited.
func (d *diskTest) checkRunning() {
	select {
	case <-d.proc.done:
		d.t.Fatalf("omnibus exited on a full disk:\n%s", d.proc.logs)
	default:
	}
}

// removeBallast removes the other program's files.
func (d *diskTest) removeBallast() {
	if err := os.Remove(d.ballast); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Remove(d.ballast + "2"); err != nil && !os.IsNotExist(err) {
		d.t.Fatal(err)
	}
}

// squeeze has the other program take the disk's free space but left.
func (d *diskTest) squeeze(left int64) {
	if take := freeBytes(d.t, d.disk) - left; take > 0 {
		out, err := exec.Command("fallocate", "-l", fmt.Sprint(take), d.ballast+"2").CombinedOutput()
		if err != nil {
			d.t.Fatalf("fallocate: %v: %s", err, out)
		}
	}
}

// kill stops the broker with SIGKILL.
func (d *diskTest) kill() {
	if err := d.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	<-d.proc.done
	_ = d.proc.cmd.Wait()
}

// restartAndCheck starts the broker again and drains the queue: every
// acknowledged message that was not completed must be there, and no
// completed one.
func (d *diskTest) restartAndCheck() {
	t := d.t
	d.start()
	drain, err := d.client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	// Drain until every message expected is in, then one quiet window
	// more for any that should not be there. An empty window before that
	// is a slow machine, not the end: only a long silence ends the drain.
	want := 0
	for id := range d.acked {
		if !d.completed[id] {
			want++
		}
	}
	got := map[string]bool{}
	lastProgress := time.Now()
	for {
		short, cancel := context.WithTimeout(d.ctx, 2*time.Second)
		msgs, err := drain.ReceiveMessages(short, 500, nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			lastProgress = time.Now()
		} else if len(got) >= want || time.Since(lastProgress) > time.Minute {
			break
		}
		for _, m := range msgs {
			if d.completed[m.MessageID] {
				t.Fatalf("message %s was completed but came back", m.MessageID)
			}
			got[m.MessageID] = true
		}
	}
	lost := 0
	for id := range d.acked {
		if !got[id] && !d.completed[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged messages lost", lost, len(d.acked))
	}
	t.Logf("after the restart: %d messages, %d completed before; none of the %d acknowledged lost", len(got), len(d.completed), len(d.acked))
}

// requireRootTestsEnv names the environment variable that turns a skip
// for want of root into a failure. .ci/run sets it to 1: CI runs as root,
// so a test that skips there has silently stopped testing.
const requireRootTestsEnv = "OMNIBUS_REQUIRE_ROOT_TESTS"

// mountTmpfs mounts a tmpfs of the given size (mount's syntax: 64m) for
// the test and returns its directory.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		why := fmt.Sprintf("this test fills a real small file system: mounting a %s tmpfs failed (%v: %s); it needs root",
			size, err, bytes.TrimSpace(out))
		if os.Getenv(requireRootTestsEnv) == "1" {
			t.Fatalf("%s, and %s=1 says this machine has it (CI runs as root: .ci/run sets it)", why, requireRootTestsEnv)
		}
		t.Skipf("%s, as CI has (where %s=1 makes this skip a failure)", why, requireRootTestsEnv)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// freeBytes is what statfs says is left on the file system of dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fillDisk writes a file at path until the file system is full, and
// returns its size.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}

// listDir returns the sorted names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// conditionRE finds the AMQP condition in the text of the Go SDK's errors,
// which do not unwrap to the AMQP error.
var conditionRE = regexp.MustCompile(`Condition: ([a-z:.-]+)`)

// amqpCondition returns the AMQP error condition in err, or "".
func amqpCondition(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return string(ae.Condition)
	}
	if err != nil {
		if m := conditionRE.FindStringSubmatch(err.Error()); m != nil {
			return m[1]
		}
	}
	return ""
}
