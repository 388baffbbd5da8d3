// Package emuconfig reads the Config.json of Microsoft's Azure Service Bus
// emulator, unchanged, into core entity descriptions.
//
// The format is UserConfig → Namespaces (exactly one) → Queues and Topics
// → Subscriptions → Rules, with ISO-8601 durations. A file written for the
// emulator loads as is, JSON comments included. Two things differ on
// purpose: the emulator's narrow caps (TTL ≤ 1 h, MaxDeliveryCount ≤ 10,
// 50 entities) are not enforced — the cloud service's ranges apply — and a
// rule with an unknown FilterType is an error naming it instead of being
// silently dropped. Properties the cloud service has but the emulator's
// schema lacks (AutoDeleteOnIdle, MaxMessageSizeInKilobytes,
// MaxSizeInMegabytes, DeadLetteringOnFilterEvaluationExceptions, Status,
// UserMetadata, EnableBatchedOperations) are accepted too.
//
// A property the format does not define (a misspelling, most often) or a
// file that is not JSON stops the load with the line, the column and the
// path of the property: Microsoft's emulator answers such files with "Out
// of memory", and silently ignoring a misspelt LockDuration would run the
// entity on a default its author did not choose.
//
// Names and values the cloud service refuses fail the load, naming the
// entity and the property, with one exception kept for the emulator's
// files: a DuplicateDetectionHistoryTimeWindow from its floor of 5 s up to
// the cloud's floor of 20 s is raised to 20 s ([MinEmulatorDuplicateWindow]).
package emuconfig
