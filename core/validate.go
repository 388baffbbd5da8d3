package core

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Validation of entity descriptions: names (names.go) and properties, in
// the ranges the cloud service accepts, with its error texts ("The
// property value for 'X' must be between A and B", durations written as
// .NET TimeSpans) preceded by the entity at fault, so that a Config.json
// that fails names it.

// maxSizeChoices are the values MaxSizeInMegabytes may take: Standard's
// 1 to 5 GB ("The specified value 16384 is invalid. The property
// 'MaxSizeInMegabytes', must be one of the following values:
// 1024;2048;3072;4096;5120") and Premium's 10 to 80 GB.
var maxSizeChoices = []int64{1024, 2048, 3072, 4096, 5120, 10240, 20480, 40960, 81920}

// Validate fills defaults and rejects names and values Service Bus
// refuses, naming the entity and property at fault. A property left zero
// takes its default.
func (e *Entity) Validate() error { return e.ValidateGiven() }

// ValidateGiven is [Entity.Validate] for a description whose properties
// named in given ("LockDuration", "MaxDeliveryCount", ...) were set by
// the client: zero there is not "default" but a value to check, which
// every property's range excludes, as Service Bus refuses
// <MaxDeliveryCount>0</MaxDeliveryCount>.
func (e *Entity) ValidateGiven(given ...string) error {
	switch e.Kind {
	case KindQueue, KindTopic, KindSubscription:
	default:
		return errf(CodeBadRequest, "entity %q: unknown kind %d", e.Name, e.Kind)
	}
	if err := validateName(e); err != nil {
		return err
	}
	v := validator{e: e}
	if e.Kind == KindTopic && (e.LockDuration != 0 || e.MaxDeliveryCount != 0 || e.RequiresSession || e.DeadLetteringOnMessageExpiration || e.ForwardTo != "" || e.ForwardDeadLetteredMessagesTo != "") {
		v.set(v.bad("a topic has no LockDuration, MaxDeliveryCount, RequiresSession, DeadLetteringOnMessageExpiration or forwarding"))
	}
	if e.Kind == KindSubscription && e.RequiresDuplicateDetection {
		v.set(v.bad("RequiresDuplicateDetection is not a subscription property"))
	}
	for _, p := range propRules {
		if !slices.Contains(p.kinds, e.Kind) {
			continue
		}
		if p.zero(e) && !slices.Contains(given, p.name) {
			p.fill(e)
		}
		p.check(&v, e)
	}
	if n := len(e.UserMetadata); n > MaxUserMetadataLength {
		v.fail("UserMetadata", "must be at most %d characters long, got %d", MaxUserMetadataLength, n)
	}
	if e.Status == "" {
		e.Status = StatusActive
	}
	switch e.Status {
	case StatusActive, StatusDisabled, StatusSendDisabled, StatusReceiveDisabled:
	default:
		v.fail("Status", "must be Active, Disabled, SendDisabled or ReceiveDisabled, got %q", e.Status)
	}
	if v.err != nil {
		return v.err
	}
	if strings.EqualFold(e.ForwardTo, e.Path()) && e.ForwardTo != "" {
		return v.bad("ForwardTo cannot forward to itself")
	}
	if len(e.AuthorizationRules) > 0 {
		if e.Kind == KindSubscription {
			return v.bad("AuthorizationRules: a subscription has no authorization rules of its own; its topic's apply")
		}
		if err := ValidateAuthorizationRules(e.Kind.String()+" '"+e.Path()+"'", e.AuthorizationRules); err != nil {
			return err
		}
	}
	for i := range e.Rules {
		if e.Kind != KindSubscription {
			return v.bad("Rules: only subscriptions have rules")
		}
		if err := e.Rules[i].Validate(); err != nil {
			return v.bad("Rules: %v", err)
		}
	}
	return nil
}

// propRule is one property with a default and a range: the kinds that
// have it, how to tell it is unset, its default and its check.
type propRule struct {
	name  string
	kinds []EntityKind
	zero  func(e *Entity) bool
	fill  func(e *Entity)
	check func(v *validator, e *Entity)
}

var (
	allKinds    = []EntityKind{KindQueue, KindTopic, KindSubscription}
	lockedKinds = []EntityKind{KindQueue, KindSubscription} // what receivers lock messages of
)

// propRules lists the properties with a default and a range, in the
// order they are checked.
var propRules = []propRule{
	{"LockDuration", lockedKinds,
		func(e *Entity) bool { return e.LockDuration == 0 },
		func(e *Entity) { e.LockDuration = DefaultLockDuration },
		func(v *validator, e *Entity) {
			v.durationBetween("LockDuration", e.LockDuration, MinLockDuration, MaxLockDuration)
		}},
	{"MaxDeliveryCount", lockedKinds,
		func(e *Entity) bool { return e.MaxDeliveryCount == 0 },
		func(e *Entity) { e.MaxDeliveryCount = DefaultMaxDeliveryCount },
		func(v *validator, e *Entity) {
			if e.MaxDeliveryCount < 1 {
				v.fail("MaxDeliveryCount", "must be between 1 and 2147483647, got %d", e.MaxDeliveryCount)
			}
		}},
	{"DefaultMessageTimeToLive", allKinds,
		func(e *Entity) bool { return e.DefaultMessageTimeToLive == 0 },
		func(e *Entity) { e.DefaultMessageTimeToLive = DefaultMessageTimeToLive },
		func(v *validator, e *Entity) {
			v.durationAtLeast("DefaultMessageTimeToLive", e.DefaultMessageTimeToLive, MinMessageTimeToLive)
		}},
	{"DuplicateDetectionHistoryTimeWindow", allKinds,
		func(e *Entity) bool { return e.DuplicateDetectionHistoryTimeWindow == 0 },
		func(e *Entity) { e.DuplicateDetectionHistoryTimeWindow = DefaultDuplicateWindow },
		func(v *validator, e *Entity) {
			v.durationBetween("DuplicateDetectionHistoryTimeWindow", e.DuplicateDetectionHistoryTimeWindow, MinDuplicateWindow, MaxDuplicateWindow)
		}},
	{"AutoDeleteOnIdle", allKinds,
		func(e *Entity) bool { return e.AutoDeleteOnIdle == 0 },
		func(e *Entity) { e.AutoDeleteOnIdle = DefaultAutoDeleteOnIdle },
		func(v *validator, e *Entity) {
			v.durationAtLeast("AutoDeleteOnIdle", e.AutoDeleteOnIdle, MinAutoDeleteOnIdle)
		}},
	{"MaxSizeInMegabytes", allKinds,
		func(e *Entity) bool { return e.MaxSizeInMegabytes == 0 },
		func(e *Entity) { e.MaxSizeInMegabytes = DefaultMaxSizeInMegabytes },
		func(v *validator, e *Entity) {
			if !slices.Contains(maxSizeChoices, e.MaxSizeInMegabytes) {
				v.set(v.bad("The specified value %d is invalid. The property 'MaxSizeInMegabytes', must be one of the following values: %s.",
					e.MaxSizeInMegabytes, joinInts(maxSizeChoices, ";")))
			}
		}},
	{"MaxMessageSizeInKilobytes", allKinds,
		func(e *Entity) bool { return e.MaxMessageSizeInKilobytes == 0 },
		func(e *Entity) { e.MaxMessageSizeInKilobytes = DefaultMaxMessageSizeKB },
		func(v *validator, e *Entity) {
			if kb := e.MaxMessageSizeInKilobytes; kb != DefaultMaxMessageSizeKB && (kb < MinLargeMessageSizeKB || kb > MaxMessageSizeKB) {
				v.fail("MaxMessageSizeInKilobytes", "must be %d, or between %d and %d, got %d", DefaultMaxMessageSizeKB, MinLargeMessageSizeKB, MaxMessageSizeKB, kb)
			}
		}},
}

// validateName checks the entity's name and, for a subscription, its
// topic's.
func validateName(e *Entity) error {
	if e.Kind == KindSubscription {
		if err := checkPathName("topic", e.Topic); err != nil {
			return err
		}
		if e.ClientAffine != nil {
			return e.ClientAffine.checkName(e.Name)
		}
		return checkLeafName("subscription", e.Name)
	}
	if e.ClientAffine != nil {
		return errf(CodeBadRequest, "%s %q: only a subscription can be client-affine.", e.Kind, e.Name)
	}
	return checkPathName(nameWhat(e.Kind.String()), e.Name)
}

// validator keeps the first property error of one entity.
type validator struct {
	e   *Entity
	err error
}

// bad is an error about the entity: its kind and path, then the text.
func (v *validator) bad(format string, args ...any) error {
	return errf(CodeBadRequest, "%s %q: %s", v.e.Kind, v.e.Path(), fmt.Sprintf(format, args...))
}

// set records err unless an earlier property failed.
func (v *validator) set(err error) {
	if v.err == nil {
		v.err = err
	}
}

// fail records "The property value for 'prop' must …".
func (v *validator) fail(prop, format string, args ...any) {
	v.set(v.bad("The property value for '%s' %s.", prop, fmt.Sprintf(format, args...)))
}

func (v *validator) durationBetween(prop string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.fail(prop, "must be between %s and %s, got %s", TimeSpan(lo), TimeSpan(hi), TimeSpan(d))
	}
}

func (v *validator) durationAtLeast(prop string, d, lo time.Duration) {
	if d < lo {
		v.fail(prop, "must be at least %s, got %s", TimeSpan(lo), TimeSpan(d))
	}
}

func joinInts(xs []int64, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, sep)
}

// TimeSpan writes d as .NET writes a TimeSpan, the form Service Bus's
// error texts use: [-][d.]hh:mm:ss[.fffffff].
func TimeSpan(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign = "-"
		if d == time.Duration(-1<<63) {
			d = time.Duration(1<<63 - 1)
		} else {
			d = -d
		}
	}
	ticks := int64(d / 100) // .NET counts 100 ns ticks
	frac := ticks % 1e7
	secs := ticks / 1e7
	days, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	out := sign
	if days > 0 {
		out += fmt.Sprintf("%d.", days)
	}
	out += fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if frac != 0 {
		out += fmt.Sprintf(".%07d", frac)
	}
	return out
}
