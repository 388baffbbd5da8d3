package core

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// EntityKind says what an [Entity] is.
type EntityKind uint8

// Entity kinds.
const (
	KindQueue EntityKind = iota + 1
	KindTopic
	KindSubscription
)

func (k EntityKind) String() string {
	switch k {
	case KindQueue:
		return "queue"
	case KindTopic:
		return "topic"
	case KindSubscription:
		return "subscription"
	}
	return fmt.Sprintf("EntityKind(%d)", uint8(k))
}

// EntityStatus is an entity's administrative status.
type EntityStatus string

// Entity statuses, with Service Bus's spelling.
const (
	StatusActive          EntityStatus = "Active"
	StatusDisabled        EntityStatus = "Disabled"
	StatusSendDisabled    EntityStatus = "SendDisabled"
	StatusReceiveDisabled EntityStatus = "ReceiveDisabled"
)

// Limits and defaults, following the cloud service (not the emulator).
const (
	DefaultLockDuration        = time.Minute
	MinLockDuration            = 5 * time.Second
	MaxLockDuration            = 5 * time.Minute
	DefaultMaxDeliveryCount    = 10
	DefaultDuplicateWindow     = 10 * time.Minute
	MinDuplicateWindow         = 20 * time.Second
	MaxDuplicateWindow         = 7 * 24 * time.Hour
	MinAutoDeleteOnIdle        = 5 * time.Minute
	DefaultMaxMessageSizeKB    = 256
	MaxMessageSizeKB           = 100 * 1024
	DefaultMaxSizeInMegabytes  = 1024
	MaxTimeToLive              = time.Duration(1<<63 - 1)
	DefaultMessageTimeToLive   = MaxTimeToLive
	DefaultAutoDeleteOnIdle    = MaxTimeToLive
	maxEntityNameLength        = 260
	maxSubscriptionNameLength  = 50
	defaultMaxSubscriptionRule = 2000
)

// Entity describes a queue, topic or subscription. One struct serves all
// three kinds; [Entity.Validate] says which fields a kind may set. Zero
// values mean "default".
type Entity struct {
	Kind  EntityKind
	Name  string // queue or topic name, or the subscription's own name
	Topic string // subscriptions: the topic's name

	LockDuration                              time.Duration // queues, subscriptions
	MaxDeliveryCount                          int32         // queues, subscriptions
	DefaultMessageTimeToLive                  time.Duration
	DeadLetteringOnMessageExpiration          bool // queues, subscriptions
	DeadLetteringOnFilterEvaluationExceptions bool // subscriptions
	RequiresDuplicateDetection                bool // queues, topics
	DuplicateDetectionHistoryTimeWindow       time.Duration
	RequiresSession                           bool // queues, subscriptions
	ForwardTo                                 string
	ForwardDeadLetteredMessagesTo             string
	AutoDeleteOnIdle                          time.Duration
	MaxSizeInMegabytes                        int64
	MaxMessageSizeInKilobytes                 int64
	EnableBatchedOperations                   bool
	EnablePartitioning                        bool
	SupportOrdering                           bool
	Status                                    EntityStatus
	UserMetadata                              string

	// Rules given at subscription creation. Empty means the $Default rule.
	Rules []Rule

	// Maintained by the broker.
	CreatedAt  time.Time
	UpdatedAt  time.Time
	AccessedAt time.Time
}

// Path returns the entity's path: "q", "t" or "t/Subscriptions/s".
func (e *Entity) Path() string {
	if e.Kind == KindSubscription {
		return e.Topic + "/Subscriptions/" + e.Name
	}
	return e.Name
}

var entityNameRE = regexp.MustCompile(`^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./~]*[A-Za-z0-9_]$`)

// Validate fills defaults and rejects values outside Service Bus's ranges,
// naming the entity and property at fault.
func (e *Entity) Validate() error {
	bad := func(prop, format string, args ...any) error {
		return errf(CodeBadRequest, "%s %q: %s %s", e.Kind, e.Path(), prop, fmt.Sprintf(format, args...))
	}
	switch e.Kind {
	case KindQueue, KindTopic, KindSubscription:
	default:
		return errf(CodeBadRequest, "entity %q: unknown kind %d", e.Name, e.Kind)
	}
	if err := validateName(e); err != nil {
		return err
	}
	hasMessages := e.Kind != KindTopic
	if hasMessages {
		if e.LockDuration == 0 {
			e.LockDuration = DefaultLockDuration
		}
		if e.LockDuration < MinLockDuration || e.LockDuration > MaxLockDuration {
			return bad("LockDuration", "must be between 5 seconds and 5 minutes, got %s", e.LockDuration)
		}
		if e.MaxDeliveryCount == 0 {
			e.MaxDeliveryCount = DefaultMaxDeliveryCount
		}
		if e.MaxDeliveryCount < 1 {
			return bad("MaxDeliveryCount", "must be at least 1, got %d", e.MaxDeliveryCount)
		}
	} else {
		if e.LockDuration != 0 || e.MaxDeliveryCount != 0 || e.RequiresSession || e.DeadLetteringOnMessageExpiration || e.ForwardTo != "" || e.ForwardDeadLetteredMessagesTo != "" {
			return bad("properties", "a topic has no LockDuration, MaxDeliveryCount, RequiresSession, DeadLetteringOnMessageExpiration or forwarding")
		}
	}
	if e.DefaultMessageTimeToLive == 0 {
		e.DefaultMessageTimeToLive = DefaultMessageTimeToLive
	}
	if e.DefaultMessageTimeToLive < time.Second {
		return bad("DefaultMessageTimeToLive", "must be at least 1 second, got %s", e.DefaultMessageTimeToLive)
	}
	if e.Kind == KindSubscription && e.RequiresDuplicateDetection {
		return bad("RequiresDuplicateDetection", "is not a subscription property")
	}
	if e.DuplicateDetectionHistoryTimeWindow == 0 {
		e.DuplicateDetectionHistoryTimeWindow = DefaultDuplicateWindow
	}
	if w := e.DuplicateDetectionHistoryTimeWindow; w < MinDuplicateWindow || w > MaxDuplicateWindow {
		// The emulator allows 5 s; accept down to 1 s so its files load.
		if w < time.Second || w > MaxDuplicateWindow {
			return bad("DuplicateDetectionHistoryTimeWindow", "must be between 20 seconds and 7 days, got %s", w)
		}
	}
	if e.AutoDeleteOnIdle == 0 {
		e.AutoDeleteOnIdle = DefaultAutoDeleteOnIdle
	}
	if e.AutoDeleteOnIdle < MinAutoDeleteOnIdle {
		return bad("AutoDeleteOnIdle", "must be at least 5 minutes, got %s", e.AutoDeleteOnIdle)
	}
	if e.MaxSizeInMegabytes == 0 {
		e.MaxSizeInMegabytes = DefaultMaxSizeInMegabytes
	}
	if e.MaxSizeInMegabytes < 1 {
		return bad("MaxSizeInMegabytes", "must be positive, got %d", e.MaxSizeInMegabytes)
	}
	if e.MaxMessageSizeInKilobytes == 0 {
		e.MaxMessageSizeInKilobytes = DefaultMaxMessageSizeKB
	}
	if e.MaxMessageSizeInKilobytes < 1 || e.MaxMessageSizeInKilobytes > MaxMessageSizeKB {
		return bad("MaxMessageSizeInKilobytes", "must be between 1 and %d, got %d", MaxMessageSizeKB, e.MaxMessageSizeInKilobytes)
	}
	if e.Status == "" {
		e.Status = StatusActive
	}
	switch e.Status {
	case StatusActive, StatusDisabled, StatusSendDisabled, StatusReceiveDisabled:
	default:
		return bad("Status", "must be Active, Disabled, SendDisabled or ReceiveDisabled, got %q", e.Status)
	}
	if strings.EqualFold(e.ForwardTo, e.Path()) && e.ForwardTo != "" {
		return bad("ForwardTo", "cannot forward to itself")
	}
	for i := range e.Rules {
		if e.Kind != KindSubscription {
			return bad("Rules", "only subscriptions have rules")
		}
		if err := e.Rules[i].Validate(); err != nil {
			return bad("Rules", "%v", err)
		}
	}
	return nil
}

func validateName(e *Entity) error {
	limit := maxEntityNameLength
	if e.Kind == KindSubscription {
		limit = maxSubscriptionNameLength
		if err := checkName("topic", e.Topic, maxEntityNameLength); err != nil {
			return err
		}
		if strings.Contains(e.Name, "/") {
			return errf(CodeBadRequest, "subscription name %q must not contain '/'", e.Name)
		}
	}
	return checkName(e.Kind.String(), e.Name, limit)
}

func checkName(kind, name string, limit int) error {
	if name == "" {
		return errf(CodeBadRequest, "%s name is empty", kind)
	}
	if len(name) > limit {
		return errf(CodeBadRequest, "%s name %q is longer than %d characters", kind, name, limit)
	}
	if !entityNameRE.MatchString(name) || strings.Contains(name, "//") {
		return errf(CodeBadRequest, "%s name %q may contain only letters, digits, '.', '-', '_', '/' and must start and end with a letter or digit", kind, name)
	}
	if strings.Contains(strings.ToLower(name), "$deadletterqueue") || strings.EqualFold(name, "$management") {
		return errf(CodeBadRequest, "%s name %q is reserved", kind, name)
	}
	return nil
}
