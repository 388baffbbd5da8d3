package core_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// Storage faults on every write path.
//
// Each faultCase is one write path. The harness runs it once per write
// the path makes, failing that write (alternately with a full disk and an
// unavailable store), and checks after each run that:
//
//   - the caller got server-busy wrapping the store's error, or nothing
//     (writes nobody waits for: delivery counts, expiry, timers);
//   - memory equals the store (Broker.Check: indexes, counts, body
//     references, bodies), before and after a restart;
//   - once the fault clears, the path works (a retry with the same lock
//     token succeeds: no lock is stranded), and draining every entity
//     yields exactly the messages the case expects: nothing lost, nothing
//     twice, no body left behind.

// faultCase is one write path under test.
type faultCase struct {
	name string
	// setup prepares the entities and messages on a healthy store and
	// returns what op needs (lock tokens, sequence numbers).
	setup func(t *testing.T, e *coretest.Env) any
	// op makes the writes under test.
	op func(t *testing.T, e *coretest.Env, s any) error
	// retry completes the path once the fault cleared, after op failed
	// (returned an error, or swallowed one); nil means op again.
	retry func(t *testing.T, e *coretest.Env, s any) error
	// want is what draining each entity yields afterwards: bodies, by
	// path (dead-letter subqueues included). Paths not listed are empty.
	want map[string][]string
}

var faultErrs = []error{
	fmt.Errorf("test disk: %w", storage.ErrNoSpace),
	fmt.Errorf("test disk: %w", storage.ErrUnavailable),
}

func TestWritePathsUnderStorageFaults(t *testing.T) {
	for _, c := range faultCases() {
		t.Run(c.name, func(t *testing.T) { runFaultCase(t, c) })
	}
}

func runFaultCase(t *testing.T, c faultCase) {
	for k := 0; ; k++ {
		if k > 20 {
			t.Fatal("the path makes more than 20 writes: runaway?")
		}
		fault := faultErrs[k%len(faultErrs)]
		env, fs := coretest.NewFault(t)
		createFaultEntities(t, env)
		s := c.setup(t, env)
		fs.FailApplies(k, 1, fault)
		err := c.op(t, env, s)
		core.Quiesce(env.Broker)
		hit := fs.Failed.Load() > 0
		fs.Heal()
		mustCheck(t, env, fmt.Sprintf("after write %d failed", k))
		if !hit {
			if err != nil {
				t.Fatalf("write %d was never made, yet: %v", k, err)
			}
			verifyDrain(t, env, c.want, "without a fault")
			return
		}
		if err != nil {
			if core.CodeOf(err) != core.CodeServerBusy || !errors.Is(err, fault) {
				t.Fatalf("write %d failed: the caller got %v (code %v), want server-busy wrapping %v", k, err, core.CodeOf(err), fault)
			}
		}
		if err != nil || c.retry != nil {
			retry := c.retry
			if retry == nil {
				retry = c.op
			}
			if err := retry(t, env, s); err != nil {
				t.Fatalf("after write %d failed and the fault cleared, retrying: %v", k, err)
			}
			core.Quiesce(env.Broker)
		}
		mustCheck(t, env, fmt.Sprintf("after write %d failed and the retry", k))
		env.Restart(t)
		mustCheck(t, env, fmt.Sprintf("after write %d failed, the retry and a restart", k))
		verifyDrain(t, env, c.want, fmt.Sprintf("after write %d failed", k))
	}
}

func mustCheck(t *testing.T, env *coretest.Env, when string) {
	t.Helper()
	if err := env.Broker.Check(); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// The entities every case runs on.
func createFaultEntities(t *testing.T, env *coretest.Env) {
	t.Helper()
	for _, e := range []core.Entity{
		{Kind: core.KindQueue, Name: "q"},
		{Kind: core.KindQueue, Name: "q2"},
		{Kind: core.KindQueue, Name: "once", MaxDeliveryCount: 1},
		{Kind: core.KindQueue, Name: "fwd", ForwardTo: "q"},
		{Kind: core.KindQueue, Name: "dd", RequiresDuplicateDetection: true},
		{Kind: core.KindQueue, Name: "ttl", DeadLetteringOnMessageExpiration: true},
		{Kind: core.KindQueue, Name: "sq", RequiresSession: true},
		{Kind: core.KindTopic, Name: "t"},
		{Kind: core.KindSubscription, Topic: "t", Name: "a"},
		{Kind: core.KindSubscription, Topic: "t", Name: "b"},
		{Kind: core.KindSubscription, Topic: "t", Name: "c", Rules: []core.Rule{{Name: "stamp",
			Filter: core.Filter{Kind: core.FilterTrue}, Action: "SET sys.Label = 'stamped'"}}},
		{Kind: core.KindSubscription, Topic: "t", Name: "f", ForwardDeadLetteredMessagesTo: "q2"},
	} {
		env.MustCreate(t, e)
	}
}

// faultPaths are the entities drained after each case.
var faultPaths = []string{"q", "q2", "once", "fwd", "dd", "ttl", "t/Subscriptions/a", "t/Subscriptions/b",
	"t/Subscriptions/c", "t/Subscriptions/f"}

// verifyDrain takes every message out of every entity and compares what
// it got with want; then nothing may be left, in memory or in the store.
func verifyDrain(t *testing.T, env *coretest.Env, want map[string][]string, when string) {
	t.Helper()
	got := make(map[string][]string)
	for _, p := range faultPaths {
		if _, err := env.Broker.GetEntity(p); err != nil {
			continue // deleted by the case
		}
		for _, path := range []string{p, p + "/$DeadLetterQueue"} {
			if bodies := drain(t, env, path); len(bodies) > 0 {
				got[path] = bodies
			}
		}
	}
	norm := func(m map[string][]string) string {
		var keys []string
		for k, v := range m {
			if len(v) > 0 {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var sb strings.Builder
		for _, k := range keys {
			v := slices.Clone(m[k])
			sort.Strings(v)
			fmt.Fprintf(&sb, "%s=%v ", k, v)
		}
		return sb.String()
	}
	if g, w := norm(got), norm(want); g != w {
		t.Fatalf("%s: drained %s, want %s", when, g, w)
	}
	mustCheck(t, env, when+", drained")
	for _, p := range faultPaths {
		if c, err := env.Broker.Counts(p); err == nil && c.Total != 0 {
			t.Fatalf("%s: %s still counts %+v after draining", when, p, c)
		}
	}
}

// drain removes everything from one queue (active, deferred, scheduled)
// and returns the bodies.
func drain(t *testing.T, env *coretest.Env, path string) []string {
	t.Helper()
	var out []string
	for {
		got, err := env.Broker.Receive(coretest.Now(t), path, core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 100})
		if err != nil {
			t.Fatalf("draining %s: %v", path, err)
		}
		if len(got) == 0 {
			break
		}
		out = append(out, coretest.Bodies(got)...)
	}
	core.Quiesce(env.Broker) // expired messages met on the way
	peeked, err := env.Broker.Peek(t.Context(), path, core.PeekOptions{Max: 1000})
	if err != nil {
		t.Fatalf("peeking %s: %v", path, err)
	}
	var deferred []int64
	for _, m := range peeked {
		switch m.State {
		case core.StateDeferred:
			deferred = append(deferred, m.SequenceNumber)
		default:
			t.Fatalf("draining %s: message %d left %v", path, m.SequenceNumber, m.State)
		}
	}
	if len(deferred) > 0 {
		got, err := env.Broker.ReceiveDeferred(t.Context(), path, core.ReceiveAndDelete, deferred)
		if err != nil {
			t.Fatalf("draining deferred messages of %s: %v", path, err)
		}
		out = append(out, coretest.Bodies(got)...)
	}
	return out
}
