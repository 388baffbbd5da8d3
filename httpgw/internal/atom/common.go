package atom

import "time"

// EntityStatus is the Status of a queue, topic or subscription.
type EntityStatus string

// The entity statuses Service Bus knows.
const (
	StatusActive          EntityStatus = "Active"
	StatusCreating        EntityStatus = "Creating"
	StatusDeleting        EntityStatus = "Deleting"
	StatusDisabled        EntityStatus = "Disabled"
	StatusReceiveDisabled EntityStatus = "ReceiveDisabled"
	StatusRenaming        EntityStatus = "Renaming"
	StatusRestoring       EntityStatus = "Restoring"
	StatusSendDisabled    EntityStatus = "SendDisabled"
	StatusUnknown         EntityStatus = "Unknown"
)

// AvailabilityAvailable is the EntityAvailabilityStatus of a usable entity.
const AvailabilityAvailable = "Available"

// CountDetails are the runtime message counts of an entity. They are
// written in the namespace
// http://schemas.microsoft.com/netservices/2011/06/servicebus.
type CountDetails struct {
	ActiveMessageCount             int64
	DeadLetterMessageCount         int64
	ScheduledMessageCount          int64
	TransferMessageCount           int64
	TransferDeadLetterMessageCount int64
}

func (c CountDetails) encode(x *writer) {
	x.open("CountDetails", "xmlns:d2p1", nsCounts)
	x.int("d2p1:ActiveMessageCount", c.ActiveMessageCount)
	x.int("d2p1:DeadLetterMessageCount", c.DeadLetterMessageCount)
	x.int("d2p1:ScheduledMessageCount", c.ScheduledMessageCount)
	x.int("d2p1:TransferMessageCount", c.TransferMessageCount)
	x.int("d2p1:TransferDeadLetterMessageCount", c.TransferDeadLetterMessageCount)
	x.close("CountDetails")
}

// countDetailsXML is CountDetails as decoded; children are matched by
// local name whatever their prefix.
type countDetailsXML struct {
	Active             *string `xml:"ActiveMessageCount"`
	DeadLetter         *string `xml:"DeadLetterMessageCount"`
	Scheduled          *string `xml:"ScheduledMessageCount"`
	Transfer           *string `xml:"TransferMessageCount"`
	TransferDeadLetter *string `xml:"TransferDeadLetterMessageCount"`
}

func (c *countDetailsXML) into(f *fields, dst *CountDetails) {
	if c == nil {
		return
	}
	f.int64("ActiveMessageCount", &dst.ActiveMessageCount, c.Active)
	f.int64("DeadLetterMessageCount", &dst.DeadLetterMessageCount, c.DeadLetter)
	f.int64("ScheduledMessageCount", &dst.ScheduledMessageCount, c.Scheduled)
	f.int64("TransferMessageCount", &dst.TransferMessageCount, c.Transfer)
	f.int64("TransferDeadLetterMessageCount", &dst.TransferDeadLetterMessageCount, c.TransferDeadLetter)
}

// AuthorizationRule is a shared access rule defined on a queue or topic
// (the AuthorizationRules element).
type AuthorizationRule struct {
	// Type is the i:type; "" is written as SharedAccessAuthorizationRule,
	// and decoding fills that default.
	Type string
	// ClaimType is "SharedAccessKey" for SAS rules ("" is written so).
	ClaimType string
	// ClaimValue is "None" for SAS rules ("" is written so).
	ClaimValue string
	// Rights holds "Listen", "Send" and/or "Manage".
	Rights  []string
	KeyName string
	// CreatedTime and ModifiedTime are omitted when zero.
	CreatedTime  time.Time
	ModifiedTime time.Time
	PrimaryKey   string
	SecondaryKey string
}

func encodeAuthorizationRules(x *writer, rules []AuthorizationRule) {
	if len(rules) == 0 {
		x.empty("AuthorizationRules")
		return
	}
	x.open("AuthorizationRules")
	for _, r := range rules {
		x.open("AuthorizationRule", "i:type", orDefault(r.Type, "SharedAccessAuthorizationRule"))
		x.text("ClaimType", orDefault(r.ClaimType, "SharedAccessKey"))
		x.text("ClaimValue", orDefault(r.ClaimValue, "None"))
		x.open("Rights")
		for _, right := range r.Rights {
			x.text("AccessRights", right)
		}
		x.close("Rights")
		x.text("KeyName", r.KeyName)
		if !r.CreatedTime.IsZero() {
			x.time("CreatedTime", r.CreatedTime)
		}
		if !r.ModifiedTime.IsZero() {
			x.time("ModifiedTime", r.ModifiedTime)
		}
		x.optText("PrimaryKey", r.PrimaryKey)
		x.optText("SecondaryKey", r.SecondaryKey)
		x.close("AuthorizationRule")
	}
	x.close("AuthorizationRules")
}

// authorizationRuleXML is AuthorizationRule as decoded.
type authorizationRuleXML struct {
	typeAttr
	ClaimType    *string  `xml:"ClaimType"`
	ClaimValue   *string  `xml:"ClaimValue"`
	Rights       []string `xml:"Rights>AccessRights"`
	KeyName      *string  `xml:"KeyName"`
	CreatedTime  *string  `xml:"CreatedTime"`
	ModifiedTime *string  `xml:"ModifiedTime"`
	PrimaryKey   *string  `xml:"PrimaryKey"`
	SecondaryKey *string  `xml:"SecondaryKey"`
}

func decodeAuthorizationRules(f *fields, in []authorizationRuleXML) []AuthorizationRule {
	if len(in) == 0 {
		return nil
	}
	out := make([]AuthorizationRule, len(in))
	for i, r := range in {
		o := &out[i]
		o.Type = orDefault(r.xsiType(), "SharedAccessAuthorizationRule")
		o.ClaimType, o.ClaimValue = "SharedAccessKey", "None"
		f.word(&o.ClaimType, r.ClaimType)
		f.word(&o.ClaimValue, r.ClaimValue)
		for _, right := range r.Rights {
			o.Rights = append(o.Rights, trim(right))
		}
		f.str(&o.KeyName, r.KeyName)
		f.time("CreatedTime", &o.CreatedTime, r.CreatedTime)
		f.time("ModifiedTime", &o.ModifiedTime, r.ModifiedTime)
		f.str(&o.PrimaryKey, r.PrimaryKey)
		f.str(&o.SecondaryKey, r.SecondaryKey)
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
