package core_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

const mib = 1 << 20

// newCappedEnv returns a broker whose entities store at most 1 MiB
// (Limits.MaxEntityBytes): Service Bus's smallest MaxSizeInMegabytes,
// 1024, would take a gigabyte to fill.
func newCappedEnv(t *testing.T) *coretest.Env {
	t.Helper()
	return coretest.NewWithLimits(t, coretest.MemOpener, core.Limits{MaxEntityBytes: mib})
}

var quotaMsgRE = regexp.MustCompile(`^core: The maximum entity size has been reached or exceeded for (Queue|Topic): '([^']+)'\. Size of entity in bytes:(\d+), Max entity size in bytes:(\d+)\.$`)

// checkQuotaErr fails t unless err is Service Bus's quota error for the
// entity, and returns the size it reports.
func checkQuotaErr(t *testing.T, err error, kind, path string) int64 {
	t.Helper()
	if !errors.Is(err, core.ErrQuotaExceeded) {
		t.Fatalf("got %v, want quota exceeded", err)
	}
	m := quotaMsgRE.FindStringSubmatch(err.Error())
	if m == nil || m[1] != kind || m[2] != path || m[4] != strconv.Itoa(mib) {
		t.Fatalf("quota error %q is not Service Bus's for %s '%s' of 1 MB", err, kind, path)
	}
	size, _ := strconv.ParseInt(m[3], 10, 64)
	return size
}

// fillUntilFull sends messages of body bytes one at a time until the
// entity refuses one, and returns how many it took and the refusal.
func fillUntilFull(t *testing.T, env *coretest.Env, path string, body int) (int, error) {
	t.Helper()
	for n := 0; ; n++ {
		m := &core.Message{Body: make([]byte, body), MessageID: fmt.Sprintf("%032d", n)}
		if _, err := env.Broker.Send(t.Context(), path, m); err != nil {
			return n, err
		}
		if n > 100_000 {
			t.Fatal("the entity never filled")
		}
	}
}

// kib is a message of 1 KiB with a 32-character id, as fillUntilFull sends.
func kib() *core.Message {
	return &core.Message{Body: make([]byte, 1024), MessageID: fmt.Sprintf("%032d", -1)}
}

func fillUntilFull2(t *testing.T, env *coretest.Env, path string) int {
	t.Helper()
	n, err := fillUntilFull(t, env, path, 1024)
	if !errors.Is(err, core.ErrQuotaExceeded) {
		t.Fatal(err)
	}
	return n
}

// A 1 MB queue takes messages up to 1 MB, counting each message's size
// and per-message overhead, refuses the next with Service Bus's error,
// and takes more once messages are received.
func TestQuotaQueueRefusesAtItsSize(t *testing.T) {
	env := newCappedEnv(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	per := int64(1024 + 32 + core.MessageOverhead)
	n, err := fillUntilFull(t, env, "q", 1024)
	size := checkQuotaErr(t, err, "Queue", "q")
	if want := int(mib / per); n != want {
		t.Errorf("a 1 MB queue took %d messages of %d bytes, want %d", n, per, want)
	}
	if size != int64(n)*per {
		t.Errorf("the error reports %d bytes, want %d", size, int64(n)*per)
	}
	if c := env.MustCounts(t, "q"); c.SizeBytes != size || c.Active != int64(n) {
		t.Errorf("counts %+v; want %d messages, %d bytes", c, n, size)
	}

	// Received messages free their space.
	env.MustReceive(t, "q", core.ReceiveAndDelete, 10)
	if more, err := fillUntilFull(t, env, "q", 1024); more != 10 {
		t.Errorf("after receiving 10 the queue took %d more (%v), want 10", more, err)
	}
	// Locked, deferred and dead-lettered messages still count.
	got := env.MustReceive(t, "q", core.PeekLock, 3)
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Defer})
	env.MustSettle(t, "q", got[1].LockToken, core.Outcome{Kind: core.DeadLetter})
	if _, err := env.Broker.Send(t.Context(), "q", kib()); !errors.Is(err, core.ErrQuotaExceeded) {
		t.Errorf("locked, deferred and dead-lettered messages stopped counting: %v", err)
	}
	env.MustReceive(t, "q/$DeadLetterQueue", core.ReceiveAndDelete, 1)
	env.MustSend(t, "q", kib())

	// What is stored survives a restart with its size.
	env.Restart(t)
	if _, err := env.Broker.Send(t.Context(), "q", kib()); !errors.Is(err, core.ErrQuotaExceeded) {
		t.Errorf("after a restart a full queue took a message: %v", err)
	}
}

// Tiny messages count their overhead: a REST batch of `{}` bodies cannot
// store millions of them in a small queue (issue 14: 1,044,000 messages).
func TestQuotaCountsTinyMessages(t *testing.T) {
	env := newCappedEnv(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	batch := make([]*core.Message, 1000)
	stored := 0
	for {
		for i := range batch {
			batch[i] = &core.Message{Body: []byte("{}")}
		}
		if _, err := env.Broker.Send(t.Context(), "q", batch...); err != nil {
			checkQuotaErr(t, err, "Queue", "q")
			break
		}
		stored += len(batch)
	}
	// Each counts 2 bytes of body, its 32-character generated id and the
	// overhead; a batch is refused whole.
	per := 2 + 32 + core.MessageOverhead
	if max := mib / per; stored > max || stored < max-len(batch) {
		t.Errorf("a 1 MB queue stored %d empty JSON messages, want %d at most and within a batch of it", stored, max)
	}
	if c := env.MustCounts(t, "q"); c.Active != int64(stored) {
		t.Errorf("a refused batch left %d messages, want %d", c.Active, stored)
	}
}

// A topic's size is what its subscriptions hold, each copy counted;
// deleting a subscription frees its share.
func TestQuotaTopicCountsSubscriptions(t *testing.T) {
	env := newCappedEnv(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	n, err := fillUntilFull(t, env, "t", 1024)
	checkQuotaErr(t, err, "Topic", "t")
	per := 1024 + 32 + core.MessageOverhead
	if want := mib / (2 * per); n != want {
		t.Errorf("a 1 MB topic with 2 subscriptions took %d messages, want %d", n, want)
	}
	if err := env.Broker.DeleteEntity(t.Context(), "t/Subscriptions/b"); err != nil {
		t.Fatal(err)
	}
	if more, want := fillUntilFull2(t, env, "t"), (mib-n*per)/per; more != want {
		t.Errorf("after deleting one of two subscriptions the topic took %d more, want %d", more, want)
	}
	// Dead-lettered copies count against the topic too.
	got := env.MustReceive(t, "t/Subscriptions/a", core.PeekLock, 1)
	env.MustSettle(t, "t/Subscriptions/a", got[0].LockToken, core.Outcome{Kind: core.DeadLetter})
	if _, err := env.Broker.Send(t.Context(), "t", kib()); !errors.Is(err, core.ErrQuotaExceeded) {
		t.Errorf("a dead-lettered subscription copy stopped counting: %v", err)
	}
}

// Session state counts towards the quota, and a state that does not fit
// is refused.
func TestQuotaCountsSessionState(t *testing.T) {
	env := newCappedEnv(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q",
		RequiresSession: true, MaxMessageSizeInKilobytes: 1024})
	sl, err := env.Broker.AcceptSession(t.Context(), "q", "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Broker.SetSessionState(t.Context(), "q", sl, make([]byte, 600<<10)); err != nil {
		t.Fatal(err)
	}
	if c := env.MustCounts(t, "q"); c.SizeBytes != 600<<10 {
		t.Errorf("size with a 600 KiB session state: %d", c.SizeBytes)
	}
	sl2, err := env.Broker.AcceptSession(t.Context(), "q", "s2")
	if err != nil {
		t.Fatal(err)
	}
	err = env.Broker.SetSessionState(t.Context(), "q", sl2, make([]byte, 600<<10))
	checkQuotaErr(t, err, "Queue", "q")
	// Shrinking is always allowed, and frees the space.
	if err := env.Broker.SetSessionState(t.Context(), "q", sl, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.Broker.SetSessionState(t.Context(), "q", sl2, make([]byte, 600<<10)); err != nil {
		t.Fatalf("after clearing the other state: %v", err)
	}
	env.Restart(t)
	if c := env.MustCounts(t, "q"); c.SizeBytes != 600<<10 {
		t.Errorf("size after restart: %d, want the session state's 600 KiB", c.SizeBytes)
	}
}

// gateStore holds every Apply until released, so sends pile up in flight.
type gateStore struct {
	storage.Store
	gate chan struct{}
}

func (g *gateStore) Apply(b *storage.Batch) error {
	<-g.gate
	return g.Store.Apply(b)
}

// Pipelined sends still being written count: however many are in flight,
// together they cannot take the queue over its size.
func TestQuotaCountsSendsInFlight(t *testing.T) {
	gs := &gateStore{gate: make(chan struct{})}
	close(gs.gate)
	env := coretest.NewWithLimits(t, func(t testing.TB, prev storage.Store) storage.Store {
		if gs.Store == nil {
			gs.Store = coretest.MemOpener(t, nil)
		}
		return gs
	}, core.Limits{MaxEntityBytes: mib})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	gs.gate = make(chan struct{})
	var wg sync.WaitGroup
	accepted, refused := 0, 0
	for i := range 2000 {
		m := &core.Message{Body: make([]byte, 1024), MessageID: fmt.Sprintf("%032d", i)}
		wg.Add(1)
		err := env.Broker.SendAsync("q", []*core.Message{m}, func(_ []int64, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
		if err != nil {
			wg.Done()
			checkQuotaErr(t, err, "Queue", "q")
			refused++
			continue
		}
		accepted++
	}
	close(gs.gate)
	wg.Wait()
	per := 1024 + 32 + core.MessageOverhead
	if want := mib / per; accepted != want || refused != 2000-want {
		t.Errorf("in flight together: %d accepted, %d refused; want %d accepted", accepted, refused, want)
	}
	if c := env.MustCounts(t, "q"); c.Active != int64(accepted) || c.SizeBytes > mib {
		t.Errorf("counts %+v after the writes, want %d messages within 1 MB", c, accepted)
	}
}

// Dead-lettering is a move: it is not refused when the dead letters are
// forwarded to a full queue.
func TestQuotaDoesNotRefuseMoves(t *testing.T) {
	env := newCappedEnv(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "full"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", ForwardDeadLetteredMessagesTo: "full", LockDuration: 5 * time.Second})
	if _, err := fillUntilFull(t, env, "full", 1024); !errors.Is(err, core.ErrQuotaExceeded) {
		t.Fatal(err)
	}
	env.MustSend(t, "q", coretest.Text("x"))
	got := env.MustReceive(t, "q", core.PeekLock, 1)
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.DeadLetter})
	if c := env.MustCounts(t, "q"); c.Total != 0 {
		t.Errorf("dead-lettered message still in its queue: %+v", c)
	}
}
