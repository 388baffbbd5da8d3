package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// damageMessages is how many messages the damage tests send; their 1 KiB
// bodies go to blob files when a memtable is flushed.
const damageMessages = 2000

// sendNumbered sends damageMessages messages with IDs 0..n-1 to queue q.
func sendNumbered(t *testing.T, p *proc) {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(connStr(p.amqp), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("x", 1024))
	for i := 0; i < damageMessages; i += 100 {
		batch, err := s.NewMessageBatch(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := i; j < i+100; j++ {
			id := fmt.Sprint(j)
			if err := batch.AddMessage(&azservicebus.Message{MessageID: &id, Body: body}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(t.Context(), batch, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// drainIDs receives and deletes everything from path and returns the
// message IDs and each message's dead-letter reason ("" for none).
func drainIDs(t *testing.T, p *proc, queue string, sub azservicebus.SubQueue) map[string]string {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(connStr(p.amqp), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{
		ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for empty := 0; empty < 3; { // three quiet receives in a row: drained
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		msgs, err := r.ReceiveMessages(ctx, 500, nil)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range msgs {
			reason := ""
			if m.DeadLetterReason != nil {
				reason = *m.DeadLetterReason
			}
			got[m.MessageID] = reason
		}
	}
	return got
}

// stop ends the broker with SIGTERM or SIGKILL and waits for it.
func stop(t *testing.T, p *proc, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-p.done
	_ = p.cmd.Wait()
}

// damageArgs returns the broker's arguments for a data directory in a new
// temporary directory, with queue q.
func damageArgs(t *testing.T) (data string, args []string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(killConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	return data, []string{"--data", data, "--config", cfg, "--amqp-addr", "127.0.0.1:0", "--http-addr", "-", "--https-addr", "-", "--amqps-addr", "-"}
}

// TestDamagedLogThroughTheBinary kills the broker after acknowledged sends
// and garbles the end of its newest write-ahead log. The broker refuses
// to start, naming the file, the offset and the bytes it would drop;
// with --repair it starts with the messages before the damage, in order.
func TestDamagedLogThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	data, args := damageArgs(t)
	p := startBinary(t, bin, nil, args...)
	sendNumbered(t, p)
	// Damage in the last records of a log is only provable once the store
	// has recorded how far the log was synced (once a second): wait for
	// its mark to cover the whole log, then crash.
	newest := waitForSyncedMark(t, data)
	stop(t, p, syscall.SIGKILL)

	f, err := os.OpenFile(newest, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte("GARBAGE-GARBAGE-GARBAGE"), st.Size()*9/10); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("started on a damaged log (killed after a minute):\n%s", out)
	}
	msg := lastLine(out)
	if err == nil || !strings.Contains(msg, filepath.Base(newest)) || !strings.Contains(msg, "replay stops at offset") ||
		!strings.Contains(msg, "bytes dropped") || !strings.Contains(msg, "--repair") {
		t.Fatalf("start on a damaged log: %v; want a refusal naming %s, the offset, the bytes dropped and --repair:\n%s",
			err, filepath.Base(newest), out)
	}
	t.Logf("refused: %s", msg)

	p = startBinary(t, bin, nil, append(args, "--repair")...)
	got := drainIDs(t, p, "q", 0)
	n := 0
	for ; got[fmt.Sprint(n)] == "" && n < damageMessages; n++ {
		if _, ok := got[fmt.Sprint(n)]; !ok {
			break
		}
	}
	if n == 0 || n >= damageMessages || len(got) != n {
		t.Fatalf("after --repair: %d messages, the first %d in a row; want the messages before the damage, all of them", len(got), n)
	}
	if kept, _ := filepath.Glob(filepath.Join(data, "omnibus-damaged", "*")); len(kept) == 0 {
		t.Fatal("--repair kept no copy of the damaged log")
	}
	t.Logf("after --repair: %d of %d messages", n, damageMessages)
}

// waitForSyncedMark waits until the store's OMNIBUS-WAL-SYNCED mark in
// data covers the whole of the newest write-ahead log, and returns the
// log's path.
func waitForSyncedMark(t *testing.T, data string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		logs, _ := filepath.Glob(filepath.Join(data, "*.log"))
		slices.Sort(logs)
		mark, _ := os.ReadFile(filepath.Join(data, "OMNIBUS-WAL-SYNCED"))
		if len(logs) > 0 && len(mark) == 32 {
			newest := logs[len(logs)-1]
			var num int
			fmt.Sscanf(filepath.Base(newest), "%d.log", &num)
			st, err := os.Stat(newest)
			if err == nil && binary.LittleEndian.Uint64(mark[8:]) == uint64(num) &&
				int64(binary.LittleEndian.Uint64(mark[16:])) >= st.Size() {
				return newest
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the synced mark did not cover the newest log within a minute (logs %v, mark %x)", logs, mark)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDamagedBlobThroughTheBinary cuts a blob file (message bodies) in
// half. It used to panic the broker on the first receive, at every start.
// Now every message is accounted for: delivered intact, or moved to the
// dead-letter subqueue as unreadable, and the broker keeps running.
func TestDamagedBlobThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	data, args := damageArgs(t)
	p := startBinary(t, bin, nil, args...)
	sendNumbered(t, p)
	// A restart replays the log and flushes it: the bodies go to blob files.
	stop(t, p, syscall.SIGTERM)
	p = startBinary(t, bin, nil, args...)
	stop(t, p, syscall.SIGTERM)
	// The largest blob file holds the most bodies.
	blobs, _ := filepath.Glob(filepath.Join(data, "*.blob"))
	var largest string
	var size int64
	for _, b := range blobs {
		if st, err := os.Stat(b); err == nil && st.Size() > size {
			largest, size = b, st.Size()
		}
	}
	if largest == "" {
		t.Fatal("no blob files after a restart: the test would prove nothing")
	}
	if err := os.Truncate(largest, size/2); err != nil {
		t.Fatal(err)
	}

	p = startBinary(t, bin, nil, args...)
	delivered := drainIDs(t, p, "q", 0)
	dead := drainIDs(t, p, "q", azservicebus.SubQueueDeadLetter)
	select {
	case <-p.done:
		t.Fatalf("omnibus exited reading a damaged blob file:\n%s", p.logs)
	default:
	}
	if len(dead) == 0 {
		t.Fatal("no message dead-lettered: the cut blob file was not read")
	}
	for id, reason := range dead {
		if reason == "" {
			t.Fatalf("dead-lettered message %s has no reason", id)
		}
	}
	for id, reason := range delivered {
		var n int
		if _, err := fmt.Sscan(id, &n); err != nil || n < 0 || n >= damageMessages || reason != "" {
			t.Fatalf("delivered a message %q (reason %q) that was never sent", id, reason)
		}
	}
	if len(delivered)+len(dead) != damageMessages {
		t.Fatalf("%d delivered + %d dead-lettered, want %d in all", len(delivered), len(dead), damageMessages)
	}
	reasons := map[string]int{}
	for _, r := range dead {
		reasons[r]++
	}
	t.Logf("%d delivered intact, %d dead-lettered %v", len(delivered), len(dead), reasons)
}

// TestLogCutShortThroughTheBinary kills the broker right after its last
// acknowledged send, without waiting for anything, and cuts the last 1000
// bytes off its newest write-ahead log: the middle of the last batch sent.
// The broker refuses to start, naming the file, where replay stops, how
// far the log had been synced and the bytes it would drop; with --repair
// it starts, says what it dropped, and has every message before the cut.
// (The store writes how far the log is synced after every fsync of it,
// before the sends it covers are acknowledged: before, it did once a
// second, and a cut within the last second's sends went unnoticed.)
func TestLogCutShortThroughTheBinary(t *testing.T) {
	bin := buildBinary(t)
	data, args := damageArgs(t)
	p := startBinary(t, bin, nil, args...)
	sendNumbered(t, p)
	stop(t, p, syscall.SIGKILL)
	logs, _ := filepath.Glob(filepath.Join(data, "*.log"))
	slices.Sort(logs)
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	newest := logs[len(logs)-1]
	st, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(newest, st.Size()-1000); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("started on a log cut short (killed after a minute):\n%s", out)
	}
	msg := lastLine(out)
	for _, want := range []string{filepath.Base(newest), "replay stops at offset", "synced up to offset", "bytes dropped", "--repair"} {
		if err == nil || !strings.Contains(msg, want) {
			t.Fatalf("start on a log cut short: %v; want a refusal saying %q:\n%s", err, want, out)
		}
	}
	t.Logf("refused: %s", msg)

	p = startBinary(t, bin, nil, append(args, "--repair")...)
	if !p.logs.contains("accepting the loss (--repair)") || !p.logs.contains("bytes dropped") {
		t.Fatalf("--repair did not say what it dropped:\n%s", p.logs)
	}
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(line, "accepting the loss") {
			t.Logf("--repair: %s", line)
		}
	}
	got := drainIDs(t, p, "q", 0)
	n := 0
	for ; n < damageMessages; n++ {
		if _, ok := got[fmt.Sprint(n)]; !ok {
			break
		}
	}
	if n == 0 || n >= damageMessages || len(got) != n {
		t.Fatalf("after --repair: %d messages, the first %d in a row; want the messages before the cut, all of them", len(got), n)
	}
	t.Logf("after --repair: the first %d of %d messages", n, damageMessages)
}
