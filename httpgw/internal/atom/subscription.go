package atom

import "time"

// SubscriptionDescription is the content of a subscription entry. Fields
// marked read-only are reported by the broker and ignored in requests.
type SubscriptionDescription struct {
	LockDuration                              time.Duration
	RequiresSession                           bool
	DefaultMessageTimeToLive                  time.Duration
	DeadLetteringOnMessageExpiration          bool
	DeadLetteringOnFilterEvaluationExceptions bool
	// DefaultRuleDescription is the first rule of a new subscription
	// (create requests only; never written in responses by the broker).
	// Nil means the $Default rule with a TrueFilter.
	DefaultRuleDescription        *RuleDescription
	MessageCount                  int64 // read-only
	MaxDeliveryCount              int32
	EnableBatchedOperations       bool
	Status                        EntityStatus
	ForwardTo                     string       // omitted when empty
	CreatedAt                     time.Time    // read-only
	UpdatedAt                     time.Time    // read-only
	AccessedAt                    time.Time    // read-only
	CountDetails                  CountDetails // read-only
	UserMetadata                  string       // omitted when empty
	ForwardDeadLetteredMessagesTo string       // omitted when empty
	AutoDeleteOnIdle              time.Duration
	EntityAvailabilityStatus      string // read-only; "" is written as Available
}

// DefaultSubscriptionDescription returns the Service Bus defaults for a
// subscription: a missing element in a request means this value.
func DefaultSubscriptionDescription() SubscriptionDescription {
	return SubscriptionDescription{
		LockDuration:                              time.Minute,
		DefaultMessageTimeToLive:                  MaxDuration,
		DeadLetteringOnFilterEvaluationExceptions: true,
		MaxDeliveryCount:                          10,
		EnableBatchedOperations:                   true,
		Status:                                    StatusActive,
		AutoDeleteOnIdle:                          MaxDuration,
		EntityAvailabilityStatus:                  AvailabilityAvailable,
	}
}

// encode writes the SubscriptionDescription element in the order of
// rest.md §4.4.
func (s *SubscriptionDescription) encode(x *writer) error {
	x.open("SubscriptionDescription", "xmlns", nsConnect, "xmlns:i", nsInstance)
	x.duration("LockDuration", s.LockDuration)
	x.boolean("RequiresSession", s.RequiresSession)
	x.duration("DefaultMessageTimeToLive", s.DefaultMessageTimeToLive)
	x.boolean("DeadLetteringOnMessageExpiration", s.DeadLetteringOnMessageExpiration)
	x.boolean("DeadLetteringOnFilterEvaluationExceptions", s.DeadLetteringOnFilterEvaluationExceptions)
	if s.DefaultRuleDescription != nil {
		if err := s.DefaultRuleDescription.encodeDefault(x); err != nil {
			return err
		}
	}
	x.int("MessageCount", s.MessageCount)
	x.int("MaxDeliveryCount", int64(s.MaxDeliveryCount))
	x.boolean("EnableBatchedOperations", s.EnableBatchedOperations)
	x.text("Status", orDefault(string(s.Status), string(StatusActive)))
	x.optText("ForwardTo", s.ForwardTo)
	x.time("CreatedAt", s.CreatedAt)
	x.time("UpdatedAt", s.UpdatedAt)
	x.time("AccessedAt", s.AccessedAt)
	s.CountDetails.encode(x)
	x.optText("UserMetadata", s.UserMetadata)
	x.optText("ForwardDeadLetteredMessagesTo", s.ForwardDeadLetteredMessagesTo)
	x.duration("AutoDeleteOnIdle", s.AutoDeleteOnIdle)
	x.text("EntityAvailabilityStatus", orDefault(s.EntityAvailabilityStatus, AvailabilityAvailable))
	x.close("SubscriptionDescription")
	return nil
}

// subscriptionXML is a SubscriptionDescription as decoded: every element
// is optional.
type subscriptionXML struct {
	LockDuration                              *string          `xml:"LockDuration"`
	RequiresSession                           *string          `xml:"RequiresSession"`
	DefaultMessageTimeToLive                  *string          `xml:"DefaultMessageTimeToLive"`
	DeadLetteringOnMessageExpiration          *string          `xml:"DeadLetteringOnMessageExpiration"`
	DeadLetteringOnFilterEvaluationExceptions *string          `xml:"DeadLetteringOnFilterEvaluationExceptions"`
	DefaultRuleDescription                    *ruleXML         `xml:"DefaultRuleDescription"`
	MessageCount                              *string          `xml:"MessageCount"`
	MaxDeliveryCount                          *string          `xml:"MaxDeliveryCount"`
	EnableBatchedOperations                   *string          `xml:"EnableBatchedOperations"`
	Status                                    *string          `xml:"Status"`
	ForwardTo                                 *string          `xml:"ForwardTo"`
	CreatedAt                                 *string          `xml:"CreatedAt"`
	UpdatedAt                                 *string          `xml:"UpdatedAt"`
	AccessedAt                                *string          `xml:"AccessedAt"`
	CountDetails                              *countDetailsXML `xml:"CountDetails"`
	UserMetadata                              *string          `xml:"UserMetadata"`
	ForwardDeadLetteredMessagesTo             *string          `xml:"ForwardDeadLetteredMessagesTo"`
	AutoDeleteOnIdle                          *string          `xml:"AutoDeleteOnIdle"`
	EntityAvailabilityStatus                  *string          `xml:"EntityAvailabilityStatus"`
}

// description converts the decoded elements, starting from the defaults.
func (in *subscriptionXML) description() (*SubscriptionDescription, error) {
	s := DefaultSubscriptionDescription()
	var f fields
	f.duration("LockDuration", &s.LockDuration, in.LockDuration)
	f.boolean("RequiresSession", &s.RequiresSession, in.RequiresSession)
	f.duration("DefaultMessageTimeToLive", &s.DefaultMessageTimeToLive, in.DefaultMessageTimeToLive)
	f.boolean("DeadLetteringOnMessageExpiration", &s.DeadLetteringOnMessageExpiration, in.DeadLetteringOnMessageExpiration)
	f.boolean("DeadLetteringOnFilterEvaluationExceptions", &s.DeadLetteringOnFilterEvaluationExceptions, in.DeadLetteringOnFilterEvaluationExceptions)
	if in.DefaultRuleDescription != nil {
		r, err := in.DefaultRuleDescription.description()
		if err != nil {
			return nil, err
		}
		s.DefaultRuleDescription = r
	}
	f.int64("MessageCount", &s.MessageCount, in.MessageCount)
	f.int32("MaxDeliveryCount", &s.MaxDeliveryCount, in.MaxDeliveryCount)
	f.boolean("EnableBatchedOperations", &s.EnableBatchedOperations, in.EnableBatchedOperations)
	f.status(&s.Status, in.Status)
	f.str(&s.ForwardTo, in.ForwardTo)
	f.time("CreatedAt", &s.CreatedAt, in.CreatedAt)
	f.time("UpdatedAt", &s.UpdatedAt, in.UpdatedAt)
	f.time("AccessedAt", &s.AccessedAt, in.AccessedAt)
	in.CountDetails.into(&f, &s.CountDetails)
	f.str(&s.UserMetadata, in.UserMetadata)
	f.str(&s.ForwardDeadLetteredMessagesTo, in.ForwardDeadLetteredMessagesTo)
	f.duration("AutoDeleteOnIdle", &s.AutoDeleteOnIdle, in.AutoDeleteOnIdle)
	f.word(&s.EntityAvailabilityStatus, in.EntityAvailabilityStatus)
	if f.err != nil {
		return nil, f.err
	}
	return &s, nil
}
