package atom

import "time"

// QueueDescription is the content of a queue entry. Fields marked
// read-only are reported by the broker and ignored in requests.
type QueueDescription struct {
	LockDuration                        time.Duration
	MaxSizeInMegabytes                  int64
	RequiresDuplicateDetection          bool
	RequiresSession                     bool
	DefaultMessageTimeToLive            time.Duration
	DeadLetteringOnMessageExpiration    bool
	DuplicateDetectionHistoryTimeWindow time.Duration
	MaxDeliveryCount                    int32
	EnableBatchedOperations             bool
	SizeInBytes                         int64 // read-only
	MessageCount                        int64 // read-only
	IsAnonymousAccessible               bool
	AuthorizationRules                  []AuthorizationRule
	Status                              EntityStatus
	ForwardTo                           string    // omitted when empty
	UserMetadata                        string    // omitted when empty
	CreatedAt                           time.Time // read-only
	UpdatedAt                           time.Time // read-only
	AccessedAt                          time.Time // read-only
	SupportOrdering                     bool
	CountDetails                        CountDetails // read-only
	AutoDeleteOnIdle                    time.Duration
	EnablePartitioning                  bool
	EntityAvailabilityStatus            string // read-only; "" is written as Available
	ForwardDeadLetteredMessagesTo       string // omitted when empty
	EnableExpress                       bool
	MaxMessageSizeInKilobytes           int64 // api-version 2021-05 and later; omitted when 0
}

// DefaultQueueDescription returns the Service Bus defaults for a queue
// (rest.md §4.4, §4.6): a missing element in a request means this value.
func DefaultQueueDescription() QueueDescription {
	return QueueDescription{
		LockDuration:                        time.Minute,
		MaxSizeInMegabytes:                  1024,
		DefaultMessageTimeToLive:            MaxDuration,
		DuplicateDetectionHistoryTimeWindow: 10 * time.Minute,
		MaxDeliveryCount:                    10,
		EnableBatchedOperations:             true,
		Status:                              StatusActive,
		SupportOrdering:                     true,
		AutoDeleteOnIdle:                    MaxDuration,
		EntityAvailabilityStatus:            AvailabilityAvailable,
		MaxMessageSizeInKilobytes:           256,
	}
}

// encode writes the QueueDescription element in the order of rest.md §4.4.
func (q *QueueDescription) encode(x *writer) {
	x.open("QueueDescription", "xmlns", nsConnect, "xmlns:i", nsInstance)
	x.duration("LockDuration", q.LockDuration)
	x.int("MaxSizeInMegabytes", q.MaxSizeInMegabytes)
	x.boolean("RequiresDuplicateDetection", q.RequiresDuplicateDetection)
	x.boolean("RequiresSession", q.RequiresSession)
	x.duration("DefaultMessageTimeToLive", q.DefaultMessageTimeToLive)
	x.boolean("DeadLetteringOnMessageExpiration", q.DeadLetteringOnMessageExpiration)
	x.duration("DuplicateDetectionHistoryTimeWindow", q.DuplicateDetectionHistoryTimeWindow)
	x.int("MaxDeliveryCount", int64(q.MaxDeliveryCount))
	x.boolean("EnableBatchedOperations", q.EnableBatchedOperations)
	x.int("SizeInBytes", q.SizeInBytes)
	x.int("MessageCount", q.MessageCount)
	x.boolean("IsAnonymousAccessible", q.IsAnonymousAccessible)
	encodeAuthorizationRules(x, q.AuthorizationRules)
	x.text("Status", orDefault(string(q.Status), string(StatusActive)))
	x.optText("ForwardTo", q.ForwardTo)
	x.optText("UserMetadata", q.UserMetadata)
	x.time("CreatedAt", q.CreatedAt)
	x.time("UpdatedAt", q.UpdatedAt)
	x.time("AccessedAt", q.AccessedAt)
	x.boolean("SupportOrdering", q.SupportOrdering)
	q.CountDetails.encode(x)
	x.duration("AutoDeleteOnIdle", q.AutoDeleteOnIdle)
	x.boolean("EnablePartitioning", q.EnablePartitioning)
	x.text("EntityAvailabilityStatus", orDefault(q.EntityAvailabilityStatus, AvailabilityAvailable))
	x.optText("ForwardDeadLetteredMessagesTo", q.ForwardDeadLetteredMessagesTo)
	x.boolean("EnableExpress", q.EnableExpress)
	if q.MaxMessageSizeInKilobytes > 0 {
		x.int("MaxMessageSizeInKilobytes", q.MaxMessageSizeInKilobytes)
	}
	x.close("QueueDescription")
}

// queueXML is a QueueDescription as decoded: every element is optional.
type queueXML struct {
	LockDuration                        *string                `xml:"LockDuration"`
	MaxSizeInMegabytes                  *string                `xml:"MaxSizeInMegabytes"`
	RequiresDuplicateDetection          *string                `xml:"RequiresDuplicateDetection"`
	RequiresSession                     *string                `xml:"RequiresSession"`
	DefaultMessageTimeToLive            *string                `xml:"DefaultMessageTimeToLive"`
	DeadLetteringOnMessageExpiration    *string                `xml:"DeadLetteringOnMessageExpiration"`
	DuplicateDetectionHistoryTimeWindow *string                `xml:"DuplicateDetectionHistoryTimeWindow"`
	MaxDeliveryCount                    *string                `xml:"MaxDeliveryCount"`
	EnableBatchedOperations             *string                `xml:"EnableBatchedOperations"`
	SizeInBytes                         *string                `xml:"SizeInBytes"`
	MessageCount                        *string                `xml:"MessageCount"`
	IsAnonymousAccessible               *string                `xml:"IsAnonymousAccessible"`
	AuthorizationRules                  []authorizationRuleXML `xml:"AuthorizationRules>AuthorizationRule"`
	Status                              *string                `xml:"Status"`
	ForwardTo                           *string                `xml:"ForwardTo"`
	UserMetadata                        *string                `xml:"UserMetadata"`
	CreatedAt                           *string                `xml:"CreatedAt"`
	UpdatedAt                           *string                `xml:"UpdatedAt"`
	AccessedAt                          *string                `xml:"AccessedAt"`
	SupportOrdering                     *string                `xml:"SupportOrdering"`
	CountDetails                        *countDetailsXML       `xml:"CountDetails"`
	AutoDeleteOnIdle                    *string                `xml:"AutoDeleteOnIdle"`
	EnablePartitioning                  *string                `xml:"EnablePartitioning"`
	EntityAvailabilityStatus            *string                `xml:"EntityAvailabilityStatus"`
	ForwardDeadLetteredMessagesTo       *string                `xml:"ForwardDeadLetteredMessagesTo"`
	EnableExpress                       *string                `xml:"EnableExpress"`
	MaxMessageSizeInKilobytes           *string                `xml:"MaxMessageSizeInKilobytes"`
}

// description converts the decoded elements, starting from the defaults.
func (in *queueXML) description() (*QueueDescription, error) {
	q := DefaultQueueDescription()
	var f fields
	f.duration("LockDuration", &q.LockDuration, in.LockDuration)
	f.int64("MaxSizeInMegabytes", &q.MaxSizeInMegabytes, in.MaxSizeInMegabytes)
	f.boolean("RequiresDuplicateDetection", &q.RequiresDuplicateDetection, in.RequiresDuplicateDetection)
	f.boolean("RequiresSession", &q.RequiresSession, in.RequiresSession)
	f.duration("DefaultMessageTimeToLive", &q.DefaultMessageTimeToLive, in.DefaultMessageTimeToLive)
	f.boolean("DeadLetteringOnMessageExpiration", &q.DeadLetteringOnMessageExpiration, in.DeadLetteringOnMessageExpiration)
	f.duration("DuplicateDetectionHistoryTimeWindow", &q.DuplicateDetectionHistoryTimeWindow, in.DuplicateDetectionHistoryTimeWindow)
	f.int32("MaxDeliveryCount", &q.MaxDeliveryCount, in.MaxDeliveryCount)
	f.boolean("EnableBatchedOperations", &q.EnableBatchedOperations, in.EnableBatchedOperations)
	f.int64("SizeInBytes", &q.SizeInBytes, in.SizeInBytes)
	f.int64("MessageCount", &q.MessageCount, in.MessageCount)
	f.boolean("IsAnonymousAccessible", &q.IsAnonymousAccessible, in.IsAnonymousAccessible)
	q.AuthorizationRules = decodeAuthorizationRules(&f, in.AuthorizationRules)
	f.status(&q.Status, in.Status)
	f.str(&q.ForwardTo, in.ForwardTo)
	f.str(&q.UserMetadata, in.UserMetadata)
	f.time("CreatedAt", &q.CreatedAt, in.CreatedAt)
	f.time("UpdatedAt", &q.UpdatedAt, in.UpdatedAt)
	f.time("AccessedAt", &q.AccessedAt, in.AccessedAt)
	f.boolean("SupportOrdering", &q.SupportOrdering, in.SupportOrdering)
	in.CountDetails.into(&f, &q.CountDetails)
	f.duration("AutoDeleteOnIdle", &q.AutoDeleteOnIdle, in.AutoDeleteOnIdle)
	f.boolean("EnablePartitioning", &q.EnablePartitioning, in.EnablePartitioning)
	f.word(&q.EntityAvailabilityStatus, in.EntityAvailabilityStatus)
	f.str(&q.ForwardDeadLetteredMessagesTo, in.ForwardDeadLetteredMessagesTo)
	f.boolean("EnableExpress", &q.EnableExpress, in.EnableExpress)
	f.int64("MaxMessageSizeInKilobytes", &q.MaxMessageSizeInKilobytes, in.MaxMessageSizeInKilobytes)
	if f.err != nil {
		return nil, f.err
	}
	return &q, nil
}
