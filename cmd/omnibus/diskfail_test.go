package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// The answers a send may get when the disk fails under the broker: stored
// (""), outcome unknown (Service Bus's ServiceTimeout, for a send in flight
// when the disk failed), or refused (server-busy, once the store knows).
const (
	condTimeout    = "com.microsoft:timeout"
	condServerBusy = "com.microsoft:server-busy"
)

// faultLoad is senders sending numbered messages until the disk fails
// under them, with every answer recorded.
type faultLoad struct {
	t       *testing.T
	sender  *azservicebus.Sender
	faultAt atomic.Int64 // unix nanos of the fault, 0 before

	mu       sync.Mutex        // guards the fields below
	acked    map[string]bool   // stored, by message ID
	unknown  map[string]bool   // answered with the outcome unknown
	inFlight map[string]string // sent before the fault, answered after: the condition ("" stored)
	wrong    []string          // answers no disk fault explains
	finished int               // senders done
	lastAck  map[int]string    // each sender's last stored send
}

// sendUntilTheDiskFails sends from 16 official SDK senders with retries
// off (so that each send's own answer is seen) to queue q, calls cause
// once 300 sends were stored, and checks that every sender was answered
// as a disk fault explains (see check). The load then knows what was
// acknowledged, for checkNoneLost after a restart.
func sendUntilTheDiskFails(t *testing.T, connectionString string, cause func()) *faultLoad {
	t.Helper()
	noRetry := &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}}
	c, err := azservicebus.NewClientFromConnectionString(connectionString, noRetry)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	sender, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const senders = 16
	load := &faultLoad{t: t, sender: sender}
	done := load.run(ctx, senders)
	load.waitAcked(300)
	load.fault(cause)
	load.check(done, senders)
	return load
}

// run starts senders goroutines and returns a channel closed once every
// one of them has had a send refused or answered with an unknown outcome.
func (l *faultLoad) run(ctx context.Context, senders int) <-chan struct{} {
	l.acked, l.unknown, l.inFlight, l.lastAck = map[string]bool{}, map[string]bool{}, map[string]string{}, map[int]string{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("%d-%d", w, i)
				before := l.faultAt.Load() == 0
				err := l.sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil)
				after := l.faultAt.Load() != 0
				cond := amqpCondition(err)
				l.mu.Lock()
				if before && after {
					l.inFlight[id] = cond
				}
				switch {
				case err == nil:
					l.acked[id] = true
					l.lastAck[w] = id
				case cond == condTimeout:
					l.unknown[id] = true
				case cond != condServerBusy:
					l.wrong = append(l.wrong, fmt.Sprintf("send %s: %v (condition %q)", id, err, cond))
				}
				if err != nil {
					l.finished++
				}
				l.mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

// waitAcked waits until n sends were stored.
func (l *faultLoad) waitAcked(n int) {
	deadline := time.Now().Add(time.Minute)
	for {
		l.mu.Lock()
		got, wrong := len(l.acked), l.wrong
		l.mu.Unlock()
		if len(wrong) > 0 {
			l.t.Fatalf("sends failed before the fault: %v", wrong)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("only %d sends stored in a minute, want %d before the fault", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fault marks the moment of the fault and causes it.
func (l *faultLoad) fault(cause func()) {
	l.faultAt.Store(time.Now().UnixNano())
	cause()
}

// check waits until every sender was answered and fails the test on a
// send never answered, or answered with something no disk fault explains.
// It requires at least one send to have been held by the failing disk and
// answered with the outcome unknown, and reports what the sends got.
func (l *faultLoad) check(done <-chan struct{}, senders int) {
	t := l.t
	select {
	case <-done:
	case <-time.After(time.Minute):
		l.mu.Lock()
		waiting := senders - l.finished
		l.mu.Unlock()
		t.Fatalf("%d of %d sends were not answered within a minute of the disk failing", waiting, senders)
	}
	answered := time.Since(time.Unix(0, l.faultAt.Load()))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.wrong) > 0 {
		t.Fatalf("sends answered with errors no disk fault explains:\n%s", strings.Join(l.wrong, "\n"))
	}
	stored := 0
	for _, cond := range l.inFlight {
		if cond == "" {
			stored++
		}
	}
	t.Logf("%d sends stored before the fault; %d sent before it and answered after (%d stored); "+
		"%d held by the failing disk answered %s (outcome unknown), %d refused %s; all %d senders answered within %v of the fault",
		len(l.acked)-stored, len(l.inFlight), stored, len(l.unknown), condTimeout, senders-len(l.unknown), condServerBusy,
		senders, answered.Round(time.Millisecond))
	if len(l.unknown) == 0 {
		t.Fatalf("no send was answered %s (outcome unknown): none was held by the failing disk", condTimeout)
	}
}

// checkNoneLost reads queue q (peeking, so that nothing a receive could
// drop is missed) and fails the test if an acknowledged send is missing;
// a send whose outcome was unknown may be there or not.
//
// With lastCommitMayGo, a sender's last stored send may be missing: a
// file system that fails can lose the group commit that raced with its
// failure although its fsync returned success (ext4 aborting its journal
// does, on Linux 6.18: a bare fdatasync loop loses its last 1 KiB in 2 of
// 30 tries), which no program on it can tell. Only that commit may go: a
// sender's earlier sends were stored before its last one was sent.
func (l *faultLoad) checkNoneLost(connectionString string, lastCommitMayGo bool) {
	t := l.t
	c, err := azservicebus.NewClientFromConnectionString(connectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for next := int64(0); ; {
		msgs, err := r.PeekMessages(t.Context(), 500, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &next})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			got[m.MessageID] = true
			next = *m.SequenceNumber + 1
		}
	}
	last := map[string]bool{}
	for _, id := range l.lastAck {
		last[id] = true
	}
	var lost, raced []string
	for id := range l.acked {
		switch {
		case got[id]:
		case lastCommitMayGo && last[id]:
			raced = append(raced, id)
		default:
			lost = append(lost, id)
		}
	}
	if len(raced) > 0 {
		slices.Sort(raced)
		t.Logf("the file system lost the group commit that raced with its failure: %v, each its sender's last stored send", raced)
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		var after []string
		for _, id := range lost {
			if cond, ok := l.inFlight[id]; ok && cond == "" {
				after = append(after, id)
			}
		}
		t.Fatalf("after the restart %d of %d acknowledged messages are lost: %v (acknowledged after the fault: %v; received %d)",
			len(lost), len(l.acked), lost, after, len(got))
	}
	unknownKept := 0
	for id := range l.unknown {
		if got[id] {
			unknownKept++
		}
	}
	t.Logf("after the restart: %d of the %d acknowledged messages there (%d lost with the commit that raced the failure); "+
		"%d of the %d whose outcome was unknown stored", len(l.acked)-len(raced), len(l.acked), len(raced), unknownKept, len(l.unknown))
}

// syncFailer fails the write-ahead log's fsyncs with EIO once on.
type syncFailer struct{ on atomic.Bool }

func (f *syncFailer) String() string { return "fail log fsyncs" }

func (f *syncFailer) MaybeError(op errorfs.Op) error {
	if f.on.Load() && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) && strings.HasSuffix(op.Path, ".log") {
		return syscall.EIO
	}
	return nil
}

// TestFailedFsyncUnderLoad runs the broker's real fronts on a store whose
// write-ahead log's fsync fails in the middle of the official SDK's sends,
// 16 at a time, retries off so that each send's own answer is seen. Every
// send in flight is answered: stored, or com.microsoft:timeout (outcome
// unknown, which the SDKs retry); later ones are refused with server-busy.
// The shutdown then takes well under the 5 s the binary allows it and
// reports the fault; after a restart every acknowledged message is there.
func TestFailedFsyncUnderLoad(t *testing.T) {
	dir := t.TempDir()
	failer := &syncFailer{}
	st, err := pebblestore.Open(dir, pebblestore.Options{FS: errorfs.Wrap(vfs.Default, failer), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	a := startWithQueue(t, app.Options{Store: st})
	load := sendUntilTheDiskFails(t, a.ConnectionString(), func() { failer.on.Store(true) })

	began := time.Now()
	shutCtx, shutCancel := context.WithTimeout(context.Background(), drainTimeout)
	defer shutCancel()
	err = a.Shutdown(shutCtx)
	took := time.Since(began)
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("shutdown after a failed fsync = %v, want the store's fault (ErrUnavailable)", err)
	}
	if took > shutdownLimit {
		t.Fatalf("shutdown after a failed fsync took %v, more than the binary's limit of %v", took, shutdownLimit)
	}
	t.Logf("shutdown after the failed fsync took %v: %v", took.Round(time.Millisecond), err)

	r := startWithQueue(t, app.Options{DataDir: dir})
	defer r.Shutdown(context.Background())
	load.checkNoneLost(r.ConnectionString(), false)
}

// startWithQueue starts an app on o (on loopback AMQP only) with queue q.
func startWithQueue(t *testing.T, o app.Options) *app.App {
	t.Helper()
	o.AMQPAddr, o.HTTPAddr, o.HTTPSAddr, o.AMQPSAddr, o.MetricsAddr = "127.0.0.1:0", "-", "-", "-", "-"
	o.Logger = zaptest.NewLogger(t)
	a, err := app.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Broker.GetEntity("q"); errors.Is(err, core.ErrNotFound) {
		if _, err := a.Broker.CreateEntity(context.Background(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}
