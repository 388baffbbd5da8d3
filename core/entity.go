package core

import (
	"fmt"
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

// Limits and defaults, following the cloud service (not the emulator);
// [Entity.Validate] enforces the ranges.
const (
	DefaultLockDuration       = time.Minute
	MinLockDuration           = 5 * time.Second
	MaxLockDuration           = 5 * time.Minute
	DefaultMaxDeliveryCount   = 10
	MinMessageTimeToLive      = time.Second
	DefaultDuplicateWindow    = 10 * time.Minute
	MinDuplicateWindow        = 20 * time.Second
	MaxDuplicateWindow        = 7 * 24 * time.Hour
	MinAutoDeleteOnIdle       = 5 * time.Minute
	DefaultMaxMessageSizeKB   = 256 // Standard's fixed size, the one value below MinLargeMessageSizeKB
	MinLargeMessageSizeKB     = 1024
	MaxMessageSizeKB          = 100 * 1024
	DefaultMaxSizeInMegabytes = 1024
	MaxUserMetadataLength     = 1024
	MaxTimeToLive             = time.Duration(1<<63 - 1)
	DefaultMessageTimeToLive  = MaxTimeToLive
	DefaultAutoDeleteOnIdle   = MaxTimeToLive
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

	// ClientAffine is set on a subscription a JMS client made by
	// consuming from its topic (clientaffine.go); nil otherwise.
	ClientAffine *ClientAffine

	// HeldPartitions is set, on a partitioned queue or topic whose
	// partitions a cluster spreads over its data groups, in the copy each
	// group holds: one flag per partition (so its length is the partition
	// count), true for those of this group (partition_held.go). Nil: this
	// broker holds every partition. A subscription's are its topic's.
	HeldPartitions []bool `json:",omitempty"`

	// AuthorizationRules are the entity's shared access authorization
	// rules (queues and topics; access.go). A token signed with one
	// reaches only this entity, its subscriptions and its subqueues.
	AuthorizationRules []AuthorizationRule `json:",omitempty"`

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
