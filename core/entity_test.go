package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want core.Address
		str  string
	}{
		{"q", core.Address{Entity: "q"}, "q"},
		{"/q/", core.Address{Entity: "q"}, "q"},
		{"q/$deadletterqueue", core.Address{Entity: "q", DeadLetter: true}, "q/$DeadLetterQueue"},
		{"a/b/c", core.Address{Entity: "a/b/c"}, "a/b/c"},
		{"t/subscriptions/s", core.Address{Entity: "t", Sub: "s"}, "t/Subscriptions/s"},
		{"T/Subscriptions/S/$DeadLetterQueue", core.Address{Entity: "T", Sub: "S", DeadLetter: true}, "T/Subscriptions/S/$DeadLetterQueue"},
	} {
		got := core.ParseAddress(tc.in)
		if got != tc.want || got.String() != tc.str {
			t.Errorf("ParseAddress(%q) = %+v (%s), want %+v (%s)", tc.in, got, got.String(), tc.want, tc.str)
		}
	}
}

// Validation errors name the entity and the property at fault.
func TestValidateNamesEntityAndProperty(t *testing.T) {
	for _, tc := range []struct {
		e    core.Entity
		want []string
	}{
		{core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Hour}, []string{`queue "q"`, "LockDuration"}},
		{core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s", MaxDeliveryCount: -2}, []string{`subscription "t/Subscriptions/s"`, "MaxDeliveryCount"}},
		{core.Entity{Kind: core.KindTopic, Name: "t", MaxSizeInMegabytes: -1}, []string{`topic "t"`, "MaxSizeInMegabytes"}},
		{core.Entity{Kind: core.KindQueue, Name: "q", MaxMessageSizeInKilobytes: 1 << 30}, []string{`queue "q"`, "MaxMessageSizeInKilobytes"}},
		{core.Entity{Kind: core.KindQueue, Name: "q", ForwardTo: "Q"}, []string{`queue "q"`, "ForwardTo"}},
		{core.Entity{Kind: core.KindQueue, Name: "q", Rules: []core.Rule{core.DefaultRule()}}, []string{`queue "q"`, "Rules"}},
		{core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s", Rules: []core.Rule{{Name: "r", Filter: core.Filter{Kind: core.FilterSQL, SQL: "("}}}}, []string{"Rules", `"r"`}},
		{core.Entity{Kind: core.KindSubscription, Topic: "t", Name: strings.Repeat("s", 51)}, []string{"subscription name", "longer than 50"}},
		{core.Entity{Kind: 9, Name: "x"}, []string{`"x"`, "unknown kind"}},
	} {
		err := tc.e.Validate()
		if core.CodeOf(err) != core.CodeBadRequest {
			t.Errorf("%+v: %v, want bad request", tc.e, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
	}
}

func TestValidateFillsDefaults(t *testing.T) {
	e := core.Entity{Kind: core.KindQueue, Name: "q"}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if e.LockDuration != core.DefaultLockDuration || e.MaxDeliveryCount != core.DefaultMaxDeliveryCount ||
		e.DefaultMessageTimeToLive != core.DefaultMessageTimeToLive || e.Status != core.StatusActive ||
		e.MaxMessageSizeInKilobytes != core.DefaultMaxMessageSizeKB || e.AutoDeleteOnIdle != core.DefaultAutoDeleteOnIdle {
		t.Errorf("defaults not filled: %+v", e)
	}
}

// Update keeps CreatedAt, stamps UpdatedAt; AccessedAt follows use.
func TestEntityTimestamps(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.Clock.Advance(time.Minute)
	if _, err := env.Broker.UpdateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q", MaxDeliveryCount: 3}); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(time.Minute)
	env.MustSend(t, "q", coretest.Text("x"))
	e, err := env.Broker.GetEntity("q")
	if err != nil {
		t.Fatal(err)
	}
	if !e.CreatedAt.Equal(coretest.Epoch) || !e.UpdatedAt.Equal(coretest.Epoch.Add(time.Minute)) || !e.AccessedAt.Equal(coretest.Epoch.Add(2*time.Minute)) {
		t.Errorf("created %v updated %v accessed %v", e.CreatedAt, e.UpdatedAt, e.AccessedAt)
	}
	if e.MaxDeliveryCount != 3 {
		t.Errorf("update not applied: %+v", e)
	}
}

// Subscriptions get the $Default rule when created without rules, and a
// subscription's rules come back with GetEntity.
func TestSubscriptionDefaultRule(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	got := env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	if len(got.Rules) != 1 || got.Rules[0].Name != core.DefaultRuleName || got.Rules[0].Filter.Kind != core.FilterTrue {
		t.Errorf("rules of a new subscription: %+v", got.Rules)
	}
	if _, err := env.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindSubscription, Topic: "missing", Name: "s"}); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("subscription on a missing topic: %v", err)
	}
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	if _, err := env.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindSubscription, Topic: "q", Name: "s"}); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("subscription on a queue: %v", err)
	}
}
