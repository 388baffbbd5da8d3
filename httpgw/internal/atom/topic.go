package atom

import "time"

// TopicDescription is the content of a topic entry. Fields marked
// read-only are reported by the broker and ignored in requests.
type TopicDescription struct {
	DefaultMessageTimeToLive            time.Duration
	MaxSizeInMegabytes                  int64
	RequiresDuplicateDetection          bool
	DuplicateDetectionHistoryTimeWindow time.Duration
	EnableBatchedOperations             bool
	SizeInBytes                         int64 // read-only
	FilteringMessagesBeforePublishing   bool
	IsAnonymousAccessible               bool
	AuthorizationRules                  []AuthorizationRule
	Status                              EntityStatus
	UserMetadata                        string    // omitted when empty
	CreatedAt                           time.Time // read-only
	UpdatedAt                           time.Time // read-only
	AccessedAt                          time.Time // read-only
	SupportOrdering                     bool
	CountDetails                        CountDetails // read-only
	SubscriptionCount                   int32        // read-only
	AutoDeleteOnIdle                    time.Duration
	EnablePartitioning                  bool
	EnableSubscriptionPartitioning      bool
	EntityAvailabilityStatus            string // read-only; "" is written as Available
	EnableExpress                       bool
	MaxMessageSizeInKilobytes           int64 // api-version 2021-05 and later; omitted when 0
	SqlFilterCount                      int32 // read-only, api-version 2024-05
	CorrelationFilterCount              int32 // read-only, api-version 2024-05
}

// DefaultTopicDescription returns the Service Bus defaults for a topic: a
// missing element in a request means this value.
func DefaultTopicDescription() TopicDescription {
	return TopicDescription{
		DefaultMessageTimeToLive:            MaxDuration,
		MaxSizeInMegabytes:                  1024,
		DuplicateDetectionHistoryTimeWindow: 10 * time.Minute,
		EnableBatchedOperations:             true,
		Status:                              StatusActive,
		SupportOrdering:                     true,
		AutoDeleteOnIdle:                    MaxDuration,
		EntityAvailabilityStatus:            AvailabilityAvailable,
		MaxMessageSizeInKilobytes:           256,
	}
}

// encode writes the TopicDescription element in the order of rest.md §4.4,
// with the 2024-05 filter counts last.
func (t *TopicDescription) encode(x *writer) {
	x.open("TopicDescription", "xmlns", nsConnect, "xmlns:i", nsInstance)
	x.duration("DefaultMessageTimeToLive", t.DefaultMessageTimeToLive)
	x.int("MaxSizeInMegabytes", t.MaxSizeInMegabytes)
	x.boolean("RequiresDuplicateDetection", t.RequiresDuplicateDetection)
	x.duration("DuplicateDetectionHistoryTimeWindow", t.DuplicateDetectionHistoryTimeWindow)
	x.boolean("EnableBatchedOperations", t.EnableBatchedOperations)
	x.int("SizeInBytes", t.SizeInBytes)
	x.boolean("FilteringMessagesBeforePublishing", t.FilteringMessagesBeforePublishing)
	x.boolean("IsAnonymousAccessible", t.IsAnonymousAccessible)
	encodeAuthorizationRules(x, t.AuthorizationRules)
	x.text("Status", orDefault(string(t.Status), string(StatusActive)))
	x.optText("UserMetadata", t.UserMetadata)
	x.time("CreatedAt", t.CreatedAt)
	x.time("UpdatedAt", t.UpdatedAt)
	x.time("AccessedAt", t.AccessedAt)
	x.boolean("SupportOrdering", t.SupportOrdering)
	t.CountDetails.encode(x)
	x.int("SubscriptionCount", int64(t.SubscriptionCount))
	x.duration("AutoDeleteOnIdle", t.AutoDeleteOnIdle)
	x.boolean("EnablePartitioning", t.EnablePartitioning)
	x.boolean("EnableSubscriptionPartitioning", t.EnableSubscriptionPartitioning)
	x.text("EntityAvailabilityStatus", orDefault(t.EntityAvailabilityStatus, AvailabilityAvailable))
	x.boolean("EnableExpress", t.EnableExpress)
	if t.MaxMessageSizeInKilobytes > 0 {
		x.int("MaxMessageSizeInKilobytes", t.MaxMessageSizeInKilobytes)
	}
	x.int("SqlFilterCount", int64(t.SqlFilterCount))
	x.int("CorrelationFilterCount", int64(t.CorrelationFilterCount))
	x.close("TopicDescription")
}

// topicXML is a TopicDescription as decoded: every element is optional.
type topicXML struct {
	DefaultMessageTimeToLive            *string                `xml:"DefaultMessageTimeToLive"`
	MaxSizeInMegabytes                  *string                `xml:"MaxSizeInMegabytes"`
	RequiresDuplicateDetection          *string                `xml:"RequiresDuplicateDetection"`
	DuplicateDetectionHistoryTimeWindow *string                `xml:"DuplicateDetectionHistoryTimeWindow"`
	EnableBatchedOperations             *string                `xml:"EnableBatchedOperations"`
	SizeInBytes                         *string                `xml:"SizeInBytes"`
	FilteringMessagesBeforePublishing   *string                `xml:"FilteringMessagesBeforePublishing"`
	IsAnonymousAccessible               *string                `xml:"IsAnonymousAccessible"`
	AuthorizationRules                  []authorizationRuleXML `xml:"AuthorizationRules>AuthorizationRule"`
	Status                              *string                `xml:"Status"`
	UserMetadata                        *string                `xml:"UserMetadata"`
	CreatedAt                           *string                `xml:"CreatedAt"`
	UpdatedAt                           *string                `xml:"UpdatedAt"`
	AccessedAt                          *string                `xml:"AccessedAt"`
	SupportOrdering                     *string                `xml:"SupportOrdering"`
	CountDetails                        *countDetailsXML       `xml:"CountDetails"`
	SubscriptionCount                   *string                `xml:"SubscriptionCount"`
	AutoDeleteOnIdle                    *string                `xml:"AutoDeleteOnIdle"`
	EnablePartitioning                  *string                `xml:"EnablePartitioning"`
	EnableSubscriptionPartitioning      *string                `xml:"EnableSubscriptionPartitioning"`
	EntityAvailabilityStatus            *string                `xml:"EntityAvailabilityStatus"`
	EnableExpress                       *string                `xml:"EnableExpress"`
	MaxMessageSizeInKilobytes           *string                `xml:"MaxMessageSizeInKilobytes"`
	SqlFilterCount                      *string                `xml:"SqlFilterCount"`
	CorrelationFilterCount              *string                `xml:"CorrelationFilterCount"`
}

// description converts the decoded elements, starting from the defaults.
func (in *topicXML) description() (*TopicDescription, error) {
	t := DefaultTopicDescription()
	var f fields
	f.duration("DefaultMessageTimeToLive", &t.DefaultMessageTimeToLive, in.DefaultMessageTimeToLive)
	f.int64("MaxSizeInMegabytes", &t.MaxSizeInMegabytes, in.MaxSizeInMegabytes)
	f.boolean("RequiresDuplicateDetection", &t.RequiresDuplicateDetection, in.RequiresDuplicateDetection)
	f.duration("DuplicateDetectionHistoryTimeWindow", &t.DuplicateDetectionHistoryTimeWindow, in.DuplicateDetectionHistoryTimeWindow)
	f.boolean("EnableBatchedOperations", &t.EnableBatchedOperations, in.EnableBatchedOperations)
	f.int64("SizeInBytes", &t.SizeInBytes, in.SizeInBytes)
	f.boolean("FilteringMessagesBeforePublishing", &t.FilteringMessagesBeforePublishing, in.FilteringMessagesBeforePublishing)
	f.boolean("IsAnonymousAccessible", &t.IsAnonymousAccessible, in.IsAnonymousAccessible)
	t.AuthorizationRules = decodeAuthorizationRules(&f, in.AuthorizationRules)
	f.status(&t.Status, in.Status)
	f.str(&t.UserMetadata, in.UserMetadata)
	f.time("CreatedAt", &t.CreatedAt, in.CreatedAt)
	f.time("UpdatedAt", &t.UpdatedAt, in.UpdatedAt)
	f.time("AccessedAt", &t.AccessedAt, in.AccessedAt)
	f.boolean("SupportOrdering", &t.SupportOrdering, in.SupportOrdering)
	in.CountDetails.into(&f, &t.CountDetails)
	f.int32("SubscriptionCount", &t.SubscriptionCount, in.SubscriptionCount)
	f.duration("AutoDeleteOnIdle", &t.AutoDeleteOnIdle, in.AutoDeleteOnIdle)
	f.boolean("EnablePartitioning", &t.EnablePartitioning, in.EnablePartitioning)
	f.boolean("EnableSubscriptionPartitioning", &t.EnableSubscriptionPartitioning, in.EnableSubscriptionPartitioning)
	f.word(&t.EntityAvailabilityStatus, in.EntityAvailabilityStatus)
	f.boolean("EnableExpress", &t.EnableExpress, in.EnableExpress)
	f.int64("MaxMessageSizeInKilobytes", &t.MaxMessageSizeInKilobytes, in.MaxMessageSizeInKilobytes)
	f.int32("SqlFilterCount", &t.SqlFilterCount, in.SqlFilterCount)
	f.int32("CorrelationFilterCount", &t.CorrelationFilterCount, in.CorrelationFilterCount)
	if f.err != nil {
		return nil, f.err
	}
	return &t, nil
}
