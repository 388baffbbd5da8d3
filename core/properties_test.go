package core_test

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// encodedText is a message whose application properties props are
// encoded, as a front hands over those it keeps as they arrived.
func encodedText(body string, props map[string]any) *core.Message {
	m := coretest.Text(body)
	m.ApplicationProperties = props
	return core.WithEncodedProperties(m)
}

// mustProperties returns m's application properties, decoded if need be.
func mustProperties(t *testing.T, m *core.Message) map[string]any {
	t.Helper()
	props, err := m.Properties()
	if err != nil {
		t.Fatalf("message %d: properties: %v", m.SequenceNumber, err)
	}
	return props
}

// Encoded properties are stored as they are and come back as they went
// in, from the hand-over cache, from the store after a restart and in a
// peek, and count towards a message's size as their decoded form does.
func TestEncodedPropertiesStoredAsTheyAre(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	props := map[string]any{"color": "red", "n": int64(7)}
	one, two := encodedText("one", props), encodedText("two", props)
	if plain := (&core.Message{Body: []byte("one"), ApplicationProperties: props}); one.Size() != plain.Size() {
		t.Errorf("size %d with encoded properties, %d with decoded ones", one.Size(), plain.Size())
	}
	sent := map[string]core.EncodedProperties{"one": one.EncodedProperties, "two": two.EncodedProperties}
	env.MustSend(t, "q", one, two)

	check := func(when string, m *core.Message) {
		t.Helper()
		ep := sent[string(m.Body)]
		if m.ApplicationProperties != nil || m.EncodedProperties.Codec != core.TestCodecID || !bytes.Equal(m.EncodedProperties.Bytes, ep.Bytes) ||
			m.EncodedProperties.Size != ep.Size {
			t.Errorf("%s: properties %v, encoded %+v; want them as sent (%+v)", when, m.ApplicationProperties, m.EncodedProperties, ep)
		}
		if got := mustProperties(t, m); !cmp.Equal(got, props) {
			t.Errorf("%s: decoded %v, want %v", when, got, props)
		}
	}
	check("from memory", env.MustReceive(t, "q", core.ReceiveAndDelete, 1)[0])
	mustCheck(t, env, "with an encoded body")
	env.Restart(t)
	peeked, err := env.Broker.Peek(t.Context(), "q", core.PeekOptions{Max: 1})
	if err != nil || len(peeked) != 1 {
		t.Fatalf("peek: %v, %v", peeked, err)
	}
	check("peeked from the store", peeked[0])
	check("received from the store", env.MustReceive(t, "q", core.ReceiveAndDelete, 1)[0])
}

// Subscriptions' SQL and correlation filters read encoded properties
// (names matching case-insensitively, as for decoded ones), and a rule
// action changes a copy's decoded properties, leaving the other
// subscriptions' shared copy as sent.
func TestFiltersAndActionsReadEncodedProperties(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	sub := func(name string, r core.Rule) {
		env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: name, Rules: []core.Rule{r}})
	}
	sub("sql", core.Rule{Name: "r", Filter: core.Filter{Kind: core.FilterSQL, SQL: "COLOR = 'red' AND n > 5"}})
	sub("corr", core.Rule{Name: "r", Filter: core.Filter{Kind: core.FilterCorrelation,
		Correlation: &core.CorrelationFilter{Properties: map[string]any{"color": "blue"}}}})
	sub("action", core.Rule{Name: "r", Filter: core.Filter{Kind: core.FilterSQL, SQL: "n > 0"}, Action: "SET n = n + 1; REMOVE color"})
	sub("all", core.Rule{Name: "r", Filter: core.Filter{Kind: core.FilterTrue}})

	env.MustSend(t, "t", encodedText("red", map[string]any{"color": "red", "n": int64(7)}),
		encodedText("blue", map[string]any{"color": "blue", "n": int64(1)}),
		encodedText("green", map[string]any{"color": "green", "n": int64(0)}))
	for path, want := range map[string][]string{
		"t/Subscriptions/sql":    {"red"},
		"t/Subscriptions/corr":   {"blue"},
		"t/Subscriptions/action": {"red", "blue"},
		"t/Subscriptions/all":    {"red", "blue", "green"},
	} {
		got := env.MustReceive(t, path, core.PeekLock, 10)
		if !cmp.Equal(coretest.Bodies(got), want) {
			t.Errorf("%s: got %v, want %v", path, coretest.Bodies(got), want)
		}
		for _, m := range got {
			props := mustProperties(t, m)
			if path == "t/Subscriptions/action" {
				if _, ok := props["color"]; ok || props["n"] != int64(2) && props["n"] != int64(8) {
					t.Errorf("%s: %s after the action: %v", path, m.Body, props)
				}
			} else if props["color"] != string(m.Body) {
				t.Errorf("%s: %s carries %v", path, m.Body, props)
			}
		}
	}
	mustCheck(t, env, "after the fan-out")
}

// A settlement that adds properties (abandon, defer, dead-letter) merges
// them into the encoded ones, and the message keeps all of them after a
// restart.
func TestSettlementsMergeIntoEncodedProperties(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", MaxDeliveryCount: 10})
	sent := map[string]any{"color": "red", "n": int64(7)}
	env.MustSend(t, "q", encodedText("abandoned", sent), encodedText("deferred", sent), encodedText("dead", sent))
	got := env.MustReceive(t, "q", core.PeekLock, 3)
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Abandon, Properties: map[string]any{"tries": int32(1)}})
	env.MustSettle(t, "q", got[1].LockToken, core.Outcome{Kind: core.Defer, Properties: map[string]any{"n": int64(8)}})
	env.MustSettle(t, "q", got[2].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "why", DeadLetterDescription: "because"})
	env.Restart(t)

	want := func(extra map[string]any) map[string]any {
		w := maps.Clone(sent)
		maps.Copy(w, extra)
		return w
	}
	abandoned := env.MustReceive(t, "q", core.PeekLock, 1)[0]
	if p := mustProperties(t, abandoned); string(abandoned.Body) != "abandoned" || !cmp.Equal(p, want(map[string]any{"tries": int32(1)})) {
		t.Errorf("abandoned: %s %v", abandoned.Body, p)
	}
	deferred, err := env.Broker.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{got[1].SequenceNumber})
	if err != nil || len(deferred) != 1 {
		t.Fatalf("receive deferred: %v, %v", deferred, err)
	}
	if p := mustProperties(t, deferred[0]); !cmp.Equal(p, want(map[string]any{"n": int64(8)})) {
		t.Errorf("deferred: %v", p)
	}
	dead := env.MustReceive(t, "q/$DeadLetterQueue", core.PeekLock, 1)[0]
	if p := mustProperties(t, dead); !cmp.Equal(p, want(map[string]any{"DeadLetterReason": "why", "DeadLetterErrorDescription": "because"})) {
		t.Errorf("dead-lettered: %v", p)
	}
	mustCheck(t, env, "after the settlements")
}

// Forwarding, a transaction and a session queue carry encoded properties
// on as they are.
func TestEncodedPropertiesForwardedAndInTransactions(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "target"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "fwd", ForwardTo: "target"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	props := map[string]any{"color": "red"}
	env.MustSend(t, "fwd", encodedText("forwarded", props))
	txn := env.Broker.BeginTxn()
	if err := txn.Send("target", "", []*core.Message{encodedText("transacted", props)}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	m := encodedText("session", props)
	m.SessionID = "s1"
	env.MustSend(t, "sq", m)
	env.Restart(t)
	for _, path := range []string{"target", "sq"} {
		var got []*core.Message
		if path == "sq" {
			sl, err := env.Broker.AcceptSession(coretest.Now(t), "sq", "s1")
			if err != nil {
				t.Fatal(err)
			}
			if got, err = env.Broker.Receive(coretest.Now(t), "sq", core.ReceiveOptions{Session: sl, Mode: core.ReceiveAndDelete, Max: 10}); err != nil {
				t.Fatal(err)
			}
		} else {
			got = env.MustReceive(t, path, core.ReceiveAndDelete, 10)
		}
		if len(got) == 0 {
			t.Fatalf("%s: nothing received", path)
		}
		for _, m := range got {
			if m.EncodedProperties.Codec != core.TestCodecID || !cmp.Equal(mustProperties(t, m), props) {
				t.Errorf("%s: %s has %v, encoded %+v", path, m.Body, m.ApplicationProperties, m.EncodedProperties)
			}
		}
	}
}

// Encoded properties a delivery passes on without decoding are still
// checked: Check reports a body whose properties do not decode, and
// dead-lettering such a message moves a stub that says why.
func TestDamagedEncodedProperties(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	sent := encodedText("one", map[string]any{"color": "red"})
	env.MustSend(t, "q", sent)
	env.Restart(t)
	key := core.BodyKey(env.Broker, "q", 1)
	v, err := env.Store.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(v, sent.EncodedProperties.Bytes)
	if at < 0 {
		t.Fatal("the body record does not hold the properties as sent")
	}
	v[at] = 0x7f // an entry count the bytes cannot hold
	b := storage.Batch{Sync: true}
	b.Set(key, v)
	if err := env.Store.Apply(&b); err != nil {
		t.Fatal(err)
	}
	err = env.Broker.Check()
	var ce *core.CheckError
	if !errors.As(err, &ce) || !strings.Contains(strings.Join(ce.Findings, "\n"), "the body of message 1 cannot be read") {
		t.Fatalf("check: %v; want the damaged properties reported", err)
	}
	got := env.MustReceive(t, "q", core.PeekLock, 1)
	if _, err := got[0].Properties(); err == nil {
		t.Fatal("damaged properties decode")
	}
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "why"})
	dead := env.MustReceive(t, "q/$DeadLetterQueue", core.ReceiveAndDelete, 1)
	if p := mustProperties(t, dead[0]); p["DeadLetterReason"] != core.ReasonBodyUnreadable {
		t.Errorf("dead-lettered: %v; want the unreadable body's stub", p)
	}
}
