package atom

import (
	"fmt"
	"strings"
	"time"
)

// RuleDescription is the content of a rule entry, and (without CreatedAt)
// the DefaultRuleDescription of a new subscription.
type RuleDescription struct {
	// Filter selects messages; nil is written as a [TrueFilter].
	Filter Filter
	// Action annotates selected messages; nil is written as an
	// [EmptyRuleAction].
	Action    Action
	CreatedAt time.Time // read-only
	Name      string
}

// DefaultCompatibilityLevel is the SQL compatibility level Service Bus
// reports for SQL filters and actions.
const DefaultCompatibilityLevel = 20

// Filter is a rule filter: [*TrueFilter], [*FalseFilter], [*SQLFilter] or
// [*CorrelationFilter].
type Filter interface{ filterType() string }

// TrueFilter matches every message. It is written as a SQL filter "1=1".
type TrueFilter struct{}

// FalseFilter matches no message. It is written as a SQL filter "1=0".
type FalseFilter struct{}

// SQLFilter matches messages with a SQL-92 like expression (i:type
// SqlFilter).
type SQLFilter struct {
	SQLExpression string
	// CompatibilityLevel is 20 on Service Bus; 0 is written as 20.
	CompatibilityLevel int32
	// Parameters bind @names in the expression.
	Parameters []KeyValue
}

// CorrelationFilter matches messages whose system and application
// properties equal the given values; empty fields are not compared.
type CorrelationFilter struct {
	CorrelationID    string
	MessageID        string
	To               string
	ReplyTo          string
	Label            string // the AMQP subject
	SessionID        string
	ReplyToSessionID string
	ContentType      string
	// Properties are application properties that must match.
	Properties []KeyValue
}

func (*TrueFilter) filterType() string        { return "TrueFilter" }
func (*FalseFilter) filterType() string       { return "FalseFilter" }
func (*SQLFilter) filterType() string         { return "SqlFilter" }
func (*CorrelationFilter) filterType() string { return "CorrelationFilter" }

// Action is a rule action: [*EmptyRuleAction] or [*SQLRuleAction].
type Action interface{ actionType() string }

// EmptyRuleAction leaves messages unchanged.
type EmptyRuleAction struct{}

// SQLRuleAction changes message properties with a SQL-like SET/REMOVE
// expression (i:type SqlRuleAction).
type SQLRuleAction struct {
	SQLExpression string
	// CompatibilityLevel is 20 on Service Bus; 0 is written as 20.
	CompatibilityLevel int32
	Parameters         []KeyValue
}

func (*EmptyRuleAction) actionType() string { return "EmptyRuleAction" }
func (*SQLRuleAction) actionType() string   { return "SqlRuleAction" }

// encode writes the RuleDescription element: Filter, Action, CreatedAt,
// Name.
func (r *RuleDescription) encode(x *writer) error {
	x.open("RuleDescription", "xmlns", nsConnect, "xmlns:i", nsInstance)
	if err := r.encodeBody(x, true); err != nil {
		return err
	}
	x.close("RuleDescription")
	return nil
}

// encodeDefault writes r as the DefaultRuleDescription of a subscription.
func (r *RuleDescription) encodeDefault(x *writer) error {
	x.open("DefaultRuleDescription")
	if err := r.encodeBody(x, false); err != nil {
		return err
	}
	x.close("DefaultRuleDescription")
	return nil
}

func (r *RuleDescription) encodeBody(x *writer, withCreatedAt bool) error {
	if err := encodeFilter(x, r.Filter); err != nil {
		return err
	}
	if err := encodeAction(x, r.Action); err != nil {
		return err
	}
	if withCreatedAt {
		x.time("CreatedAt", r.CreatedAt)
	}
	x.text("Name", r.Name)
	return nil
}

func compat(level int32) int64 {
	if level == 0 {
		return DefaultCompatibilityLevel
	}
	return int64(level)
}

func encodeFilter(x *writer, f Filter) error {
	switch f := f.(type) {
	case nil, *TrueFilter:
		x.open("Filter", "i:type", "TrueFilter")
		x.text("SqlExpression", "1=1")
		x.int("CompatibilityLevel", DefaultCompatibilityLevel)
	case *FalseFilter:
		x.open("Filter", "i:type", "FalseFilter")
		x.text("SqlExpression", "1=0")
		x.int("CompatibilityLevel", DefaultCompatibilityLevel)
	case *SQLFilter:
		x.open("Filter", "i:type", "SqlFilter")
		x.text("SqlExpression", f.SQLExpression)
		x.int("CompatibilityLevel", compat(f.CompatibilityLevel))
		if err := encodeKeyValues(x, "Parameters", f.Parameters); err != nil {
			return err
		}
	case *CorrelationFilter:
		x.open("Filter", "i:type", "CorrelationFilter")
		x.optText("CorrelationId", f.CorrelationID)
		x.optText("MessageId", f.MessageID)
		x.optText("To", f.To)
		x.optText("ReplyTo", f.ReplyTo)
		x.optText("Label", f.Label)
		x.optText("SessionId", f.SessionID)
		x.optText("ReplyToSessionId", f.ReplyToSessionID)
		x.optText("ContentType", f.ContentType)
		if err := encodeKeyValues(x, "Properties", f.Properties); err != nil {
			return err
		}
	default:
		return fmt.Errorf("atom: unsupported filter type %T", f)
	}
	x.close("Filter")
	return nil
}

func encodeAction(x *writer, a Action) error {
	switch a := a.(type) {
	case nil, *EmptyRuleAction:
		x.empty("Action", "i:type", "EmptyRuleAction")
	case *SQLRuleAction:
		x.open("Action", "i:type", "SqlRuleAction")
		x.text("SqlExpression", a.SQLExpression)
		x.int("CompatibilityLevel", compat(a.CompatibilityLevel))
		if err := encodeKeyValues(x, "Parameters", a.Parameters); err != nil {
			return err
		}
		x.close("Action")
	default:
		return fmt.Errorf("atom: unsupported action type %T", a)
	}
	return nil
}

// ruleXML is a RuleDescription or DefaultRuleDescription as decoded.
type ruleXML struct {
	Filter    *filterXML `xml:"Filter"`
	Action    *actionXML `xml:"Action"`
	CreatedAt *string    `xml:"CreatedAt"`
	Name      *string    `xml:"Name"`
}

type filterXML struct {
	typeAttr
	SQLExpression      *string       `xml:"SqlExpression"`
	CompatibilityLevel *string       `xml:"CompatibilityLevel"`
	Parameters         []keyValueXML `xml:"Parameters>KeyValueOfstringanyType"`
	CorrelationID      *string       `xml:"CorrelationId"`
	MessageID          *string       `xml:"MessageId"`
	To                 *string       `xml:"To"`
	ReplyTo            *string       `xml:"ReplyTo"`
	Label              *string       `xml:"Label"`
	SessionID          *string       `xml:"SessionId"`
	ReplyToSessionID   *string       `xml:"ReplyToSessionId"`
	ContentType        *string       `xml:"ContentType"`
	Properties         []keyValueXML `xml:"Properties>KeyValueOfstringanyType"`
}

type actionXML struct {
	typeAttr
	SQLExpression      *string       `xml:"SqlExpression"`
	CompatibilityLevel *string       `xml:"CompatibilityLevel"`
	Parameters         []keyValueXML `xml:"Parameters>KeyValueOfstringanyType"`
}

// description converts a decoded rule. A missing filter is a TrueFilter
// and a missing action an EmptyRuleAction, as on Service Bus.
func (in *ruleXML) description() (*RuleDescription, error) {
	var f fields
	r := &RuleDescription{}
	r.Filter = in.Filter.filter(&f)
	r.Action = in.Action.action(&f)
	f.time("CreatedAt", &r.CreatedAt, in.CreatedAt)
	f.str(&r.Name, in.Name)
	if f.err != nil {
		return nil, f.err
	}
	return r, nil
}

func (in *filterXML) filter(f *fields) Filter {
	if in == nil {
		return &TrueFilter{}
	}
	switch t := in.xsiType(); {
	case strings.EqualFold(t, "TrueFilter"):
		return &TrueFilter{}
	case strings.EqualFold(t, "FalseFilter"):
		return &FalseFilter{}
	case strings.EqualFold(t, "SqlFilter"):
		out := &SQLFilter{CompatibilityLevel: DefaultCompatibilityLevel}
		f.str(&out.SQLExpression, in.SQLExpression)
		f.int32("CompatibilityLevel", &out.CompatibilityLevel, in.CompatibilityLevel)
		out.Parameters = decodeKeyValues(f, "Parameters", in.Parameters)
		if out.CompatibilityLevel == 0 {
			out.CompatibilityLevel = DefaultCompatibilityLevel
		}
		return out
	case strings.EqualFold(t, "CorrelationFilter"):
		out := &CorrelationFilter{}
		f.str(&out.CorrelationID, in.CorrelationID)
		f.str(&out.MessageID, in.MessageID)
		f.str(&out.To, in.To)
		f.str(&out.ReplyTo, in.ReplyTo)
		f.str(&out.Label, in.Label)
		f.str(&out.SessionID, in.SessionID)
		f.str(&out.ReplyToSessionID, in.ReplyToSessionID)
		f.str(&out.ContentType, in.ContentType)
		out.Properties = decodeKeyValues(f, "Properties", in.Properties)
		return out
	default:
		f.fail("Filter", t, fmt.Errorf("unknown filter type"))
		return nil
	}
}

func (in *actionXML) action(f *fields) Action {
	if in == nil {
		return &EmptyRuleAction{}
	}
	switch t := in.xsiType(); {
	case strings.EqualFold(t, "EmptyRuleAction"):
		return &EmptyRuleAction{}
	case strings.EqualFold(t, "SqlRuleAction"):
		out := &SQLRuleAction{CompatibilityLevel: DefaultCompatibilityLevel}
		f.str(&out.SQLExpression, in.SQLExpression)
		f.int32("CompatibilityLevel", &out.CompatibilityLevel, in.CompatibilityLevel)
		out.Parameters = decodeKeyValues(f, "Parameters", in.Parameters)
		if out.CompatibilityLevel == 0 {
			out.CompatibilityLevel = DefaultCompatibilityLevel
		}
		return out
	default:
		f.fail("Action", t, fmt.Errorf("unknown action type"))
		return nil
	}
}
