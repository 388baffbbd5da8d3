package core_test

import (
	"math"
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
		{core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Hour}, []string{`queue "q"`, "'LockDuration'"}},
		{core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s", MaxDeliveryCount: -2}, []string{`subscription "t/Subscriptions/s"`, "'MaxDeliveryCount'"}},
		{core.Entity{Kind: core.KindTopic, Name: "t", MaxSizeInMegabytes: -1}, []string{`topic "t"`, "'MaxSizeInMegabytes'"}},
		{core.Entity{Kind: core.KindQueue, Name: "q", MaxMessageSizeInKilobytes: 1 << 30}, []string{`queue "q"`, "'MaxMessageSizeInKilobytes'"}},
		{core.Entity{Kind: core.KindQueue, Name: "q", ForwardTo: "Q"}, []string{`queue "q"`, "ForwardTo"}},
		{core.Entity{Kind: core.KindQueue, Name: "q", Rules: []core.Rule{core.DefaultRule()}}, []string{`queue "q"`, "Rules"}},
		{core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s", Rules: []core.Rule{{Name: "r", Filter: core.Filter{Kind: core.FilterSQL, SQL: "("}}}}, []string{"Rules", `"r"`}},
		{core.Entity{Kind: core.KindSubscription, Topic: "t", Name: strings.Repeat("s", 51)}, []string{strings.Repeat("s", 51), "exceeds the '50' character limit"}},
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

// Names follow Service Bus's rules (core/names.go): each case is refused
// with the text given, or accepted when that is empty. Subscription and
// rule names share the rules of a segment.
func TestValidateNames(t *testing.T) {
	const badChars = "contains character(s) that is not allowed by Service Bus. Entity segments can contain only letters, numbers, periods (.), hyphens (-), and underscores (_)."
	const startEnd = "must start and end with a letter or a number"
	const slashEnds = "The entity name/path cannot contain '/' as prefix or suffix."
	const dotSegs = "has an empty, '.' or '..' segment"
	long := func(n int) string { return "a" + strings.Repeat("b", n-1) }
	for _, tc := range []struct {
		kind core.EntityKind // KindSubscription also checks the name as a rule's
		name string
		want string
	}{
		{core.KindQueue, "orders", ""},
		{core.KindQueue, "A", ""},
		{core.KindQueue, "9", ""},
		{core.KindQueue, "a.b-c_d", ""},
		{core.KindQueue, "a/b/c", ""},
		{core.KindQueue, "a/.hidden/c", ""},
		{core.KindQueue, "a/b_/c", ""},
		{core.KindQueue, "a/.../c", ""},
		{core.KindTopic, long(260), ""},
		{core.KindQueue, long(261), "exceeds the '260' character limit"},
		{core.KindTopic, long(261), "exceeds the '260' character limit"},
		{core.KindQueue, "", "The queue name cannot be empty"},
		{core.KindQueue, "a/../orders", dotSegs},
		{core.KindQueue, "a/./orders", dotSegs},
		{core.KindTopic, "a//b", dotSegs},
		{core.KindQueue, "a/..", startEnd},
		{core.KindQueue, "../a", startEnd},
		{core.KindQueue, "/orders", slashEnds},
		{core.KindQueue, "orders/", slashEnds},
		{core.KindQueue, "/", slashEnds},
		{core.KindQueue, "-orders", startEnd},
		{core.KindQueue, "orders-", startEnd},
		{core.KindQueue, ".orders", startEnd},
		{core.KindQueue, "orders.", startEnd},
		{core.KindQueue, "_orders", startEnd},
		{core.KindQueue, "orders_", startEnd},
		{core.KindQueue, "a b", badChars},
		{core.KindQueue, "a~b", badChars},
		{core.KindQueue, "a+b", badChars},
		{core.KindQueue, "a%2e%2e", badChars},
		{core.KindQueue, "a\\b", badChars},
		{core.KindQueue, "a?b", badChars},
		{core.KindQueue, "a#b", badChars},
		{core.KindQueue, "a@b", badChars},
		{core.KindQueue, "a*b", badChars},
		{core.KindQueue, "a:b", badChars},
		{core.KindQueue, "a/$DeadLetterQueue", badChars},
		{core.KindQueue, "$management", badChars},
		{core.KindQueue, "caf\u00e9", badChars},
		{core.KindQueue, "a\x00b", badChars},
		{core.KindSubscription, "s", ""},
		{core.KindSubscription, "s.1-2_3", ""},
		{core.KindSubscription, long(50), ""},
		{core.KindSubscription, long(51), "exceeds the '50' character limit"},
		{core.KindSubscription, "", "cannot be empty"},
		{core.KindSubscription, "a/b", "contains an invalid character '/'"},
		{core.KindSubscription, "-s", startEnd},
		{core.KindSubscription, "s.", startEnd},
		{core.KindSubscription, "s s", badChars},
	} {
		e := core.Entity{Kind: tc.kind, Name: tc.name}
		if tc.kind == core.KindSubscription {
			e.Topic = "t"
		}
		check := func(what string, err error) {
			t.Helper()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s %q: %v, want it accepted", what, tc.name, err)
			case tc.want != "" && (core.CodeOf(err) != core.CodeBadRequest || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s %q: %v, want bad request saying %q", what, tc.name, err, tc.want)
			}
		}
		check(tc.kind.String(), e.Validate())
		if tc.kind == core.KindSubscription {
			r := core.Rule{Name: tc.name, Filter: core.Filter{Kind: core.FilterTrue}}
			check("rule", r.Validate())
		}
	}
	// A subscription's topic follows the queue and topic rules; the
	// $Default rule keeps its name.
	if err := (&core.Entity{Kind: core.KindSubscription, Topic: "a/../t", Name: "s"}).Validate(); err == nil || !strings.Contains(err.Error(), dotSegs) {
		t.Errorf("subscription of topic a/../t: %v", err)
	}
	if r := core.DefaultRule(); r.Validate() != nil {
		t.Errorf("$Default: %v", r.Validate())
	}
}

// Properties stay within Service Bus's ranges: each case sets one
// property and is accepted, or refused naming it.
func TestValidateRanges(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		kind core.EntityKind
		set  func(e *core.Entity)
		want string // "" accepted, else the property named in the error
	}{
		{"lock 5s", core.KindQueue, func(e *core.Entity) { e.LockDuration = 5 * time.Second }, ""},
		{"lock 5m", core.KindSubscription, func(e *core.Entity) { e.LockDuration = 5 * time.Minute }, ""},
		{"lock 4.9s", core.KindQueue, func(e *core.Entity) { e.LockDuration = 4900 * time.Millisecond }, "'LockDuration' must be between 00:00:05 and 00:05:00, got 00:00:04.9000000"},
		{"lock 5m1s", core.KindSubscription, func(e *core.Entity) { e.LockDuration = 5*time.Minute + time.Second }, "'LockDuration' must be between 00:00:05 and 00:05:00"},
		{"lock negative", core.KindQueue, func(e *core.Entity) { e.LockDuration = -time.Minute }, "'LockDuration'"},
		{"deliveries 1", core.KindQueue, func(e *core.Entity) { e.MaxDeliveryCount = 1 }, ""},
		{"deliveries max", core.KindQueue, func(e *core.Entity) { e.MaxDeliveryCount = math.MaxInt32 }, ""},
		{"deliveries -1", core.KindSubscription, func(e *core.Entity) { e.MaxDeliveryCount = -1 }, "'MaxDeliveryCount' must be between 1 and 2147483647"},
		{"ttl 1s", core.KindQueue, func(e *core.Entity) { e.DefaultMessageTimeToLive = time.Second }, ""},
		{"ttl 999ms", core.KindTopic, func(e *core.Entity) { e.DefaultMessageTimeToLive = 999 * time.Millisecond }, "'DefaultMessageTimeToLive' must be at least 00:00:01"},
		{"ttl negative", core.KindQueue, func(e *core.Entity) { e.DefaultMessageTimeToLive = -time.Hour }, "'DefaultMessageTimeToLive'"},
		{"dedup 20s", core.KindQueue, func(e *core.Entity) { e.DuplicateDetectionHistoryTimeWindow = 20 * time.Second }, ""},
		{"dedup 7d", core.KindTopic, func(e *core.Entity) { e.DuplicateDetectionHistoryTimeWindow = 7 * day }, ""},
		{"dedup 19s", core.KindQueue, func(e *core.Entity) { e.DuplicateDetectionHistoryTimeWindow = 19 * time.Second }, "'DuplicateDetectionHistoryTimeWindow' must be between 00:00:20 and 7.00:00:00"},
		{"dedup 7d1s", core.KindTopic, func(e *core.Entity) { e.DuplicateDetectionHistoryTimeWindow = 7*day + time.Second }, "'DuplicateDetectionHistoryTimeWindow'"},
		{"autodelete 5m", core.KindQueue, func(e *core.Entity) { e.AutoDeleteOnIdle = 5 * time.Minute }, ""},
		{"autodelete 4m59s", core.KindSubscription, func(e *core.Entity) { e.AutoDeleteOnIdle = 5*time.Minute - time.Second }, "'AutoDeleteOnIdle' must be at least 00:05:00"},
		{"size 1024", core.KindQueue, func(e *core.Entity) { e.MaxSizeInMegabytes = 1024 }, ""},
		{"size 5120", core.KindTopic, func(e *core.Entity) { e.MaxSizeInMegabytes = 5120 }, ""},
		{"size 81920", core.KindQueue, func(e *core.Entity) { e.MaxSizeInMegabytes = 81920 }, ""},
		{"size 1", core.KindQueue, func(e *core.Entity) { e.MaxSizeInMegabytes = 1 }, "The specified value 1 is invalid. The property 'MaxSizeInMegabytes', must be one of the following values: 1024;2048;3072;4096;5120;10240;20480;40960;81920."},
		{"size 1500", core.KindQueue, func(e *core.Entity) { e.MaxSizeInMegabytes = 1500 }, "'MaxSizeInMegabytes'"},
		{"size 16384", core.KindTopic, func(e *core.Entity) { e.MaxSizeInMegabytes = 16384 }, "The specified value 16384 is invalid"},
		{"size 2^63-1", core.KindQueue, func(e *core.Entity) { e.MaxSizeInMegabytes = math.MaxInt64 }, "'MaxSizeInMegabytes'"},
		{"message 256KB", core.KindQueue, func(e *core.Entity) { e.MaxMessageSizeInKilobytes = 256 }, ""},
		{"message 1024KB", core.KindQueue, func(e *core.Entity) { e.MaxMessageSizeInKilobytes = 1024 }, ""},
		{"message 100MB", core.KindTopic, func(e *core.Entity) { e.MaxMessageSizeInKilobytes = 102400 }, ""},
		{"message 1KB", core.KindQueue, func(e *core.Entity) { e.MaxMessageSizeInKilobytes = 1 }, "'MaxMessageSizeInKilobytes' must be 256, or between 1024 and 102400"},
		{"message 512KB", core.KindQueue, func(e *core.Entity) { e.MaxMessageSizeInKilobytes = 512 }, "'MaxMessageSizeInKilobytes'"},
		{"message 102401KB", core.KindTopic, func(e *core.Entity) { e.MaxMessageSizeInKilobytes = 102401 }, "'MaxMessageSizeInKilobytes'"},
		{"metadata 1024", core.KindQueue, func(e *core.Entity) { e.UserMetadata = strings.Repeat("m", 1024) }, ""},
		{"metadata 1025", core.KindSubscription, func(e *core.Entity) { e.UserMetadata = strings.Repeat("m", 1025) }, "'UserMetadata' must be at most 1024 characters"},
		{"status", core.KindQueue, func(e *core.Entity) { e.Status = "Sleeping" }, "'Status'"},
	} {
		e := core.Entity{Kind: tc.kind, Name: "e"}
		if tc.kind == core.KindSubscription {
			e.Topic = "t"
		}
		tc.set(&e)
		err := e.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, err)
		case tc.want != "" && (core.CodeOf(err) != core.CodeBadRequest || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want bad request saying %q", tc.name, err, tc.want)
		}
	}
}

// A property the client set to zero is refused (Service Bus has no zero
// in any range); left unset, zero means the default.
func TestValidateGivenZero(t *testing.T) {
	for _, tc := range []struct {
		kind core.EntityKind
		prop string
		want string
	}{
		{core.KindQueue, "LockDuration", "'LockDuration' must be between 00:00:05 and 00:05:00, got 00:00:00"},
		{core.KindSubscription, "LockDuration", "'LockDuration'"},
		{core.KindQueue, "MaxDeliveryCount", "'MaxDeliveryCount' must be between 1 and 2147483647, got 0"},
		{core.KindQueue, "DefaultMessageTimeToLive", "'DefaultMessageTimeToLive' must be at least 00:00:01, got 00:00:00"},
		{core.KindTopic, "DuplicateDetectionHistoryTimeWindow", "'DuplicateDetectionHistoryTimeWindow'"},
		{core.KindSubscription, "AutoDeleteOnIdle", "'AutoDeleteOnIdle' must be at least 00:05:00, got 00:00:00"},
		{core.KindTopic, "MaxSizeInMegabytes", "The specified value 0 is invalid. The property 'MaxSizeInMegabytes'"},
		{core.KindQueue, "MaxMessageSizeInKilobytes", "'MaxMessageSizeInKilobytes' must be 256, or between 1024 and 102400, got 0"},
	} {
		e := core.Entity{Kind: tc.kind, Name: "e", Topic: "t"}
		if tc.kind != core.KindSubscription {
			e.Topic = ""
		}
		d := e
		if err := d.ValidateGiven(tc.prop); core.CodeOf(err) != core.CodeBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s given as zero: %v, want bad request saying %q", tc.kind, tc.prop, err, tc.want)
		}
		d = e
		if err := d.ValidateGiven("Unrelated"); err != nil {
			t.Errorf("%s %s left unset: %v", tc.kind, tc.prop, err)
		}
	}
	// A topic has no LockDuration: naming it given changes nothing.
	e := core.Entity{Kind: core.KindTopic, Name: "t"}
	if err := e.ValidateGiven("LockDuration", "MaxDeliveryCount"); err != nil {
		t.Errorf("topic with LockDuration and MaxDeliveryCount named given: %v", err)
	}
}

func TestTimeSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "00:00:00", 5 * time.Second: "00:00:05", 5 * time.Minute: "00:05:00", 7 * 24 * time.Hour: "7.00:00:00",
		1500 * time.Millisecond: "00:00:01.5000000", -time.Minute: "-00:01:00", 26*time.Hour + 3*time.Second: "1.02:00:03",
		core.MaxTimeToLive: "106751.23:47:16.8547758",
	} {
		if got := core.TimeSpan(d); got != want {
			t.Errorf("TimeSpan(%v) = %q, want %q", d, got, want)
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
