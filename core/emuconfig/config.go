package emuconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Config is a loaded Config.json.
type Config struct {
	// Namespace and Entities are the first namespace's (the default one):
	// Namespaces[0].Name and Namespaces[0].Entities.
	Namespace string
	// Entities in creation order: queues, then topics each followed by
	// their subscriptions (whose Rules are set).
	Entities []core.Entity
	// Namespaces are every namespace of the file, in its order; the
	// first is omnibus's default namespace.
	Namespaces []Namespace
	// LoggingType is the Logging.Type value ("File", "Console", ...).
	LoggingType string
}

// Namespace is one namespace of a Config.json.
type Namespace struct {
	Name string
	// Entities in creation order, as Config.Entities.
	Entities []core.Entity
	// AuthorizationRules are the namespace's own shared access
	// authorization rules (omnibus's addition to the file format); none:
	// the root key's rule.
	AuthorizationRules []core.AuthorizationRule
	// Limits are the namespace's own limits (omnibus's addition: a
	// "Limits" object), valid when HasLimits; a limit the object leaves
	// out is zero, the process's default.
	Limits    namespace.Limits
	HasLimits bool
}

// fileRule is a shared access authorization rule in the file, as
// Service Bus's SharedAccessAuthorizationRule: Rights lists "Listen",
// "Send" and "Manage".
type fileRule struct {
	KeyName      string
	PrimaryKey   string
	SecondaryKey string
	Rights       []string
}

type fileConfig struct {
	UserConfig struct {
		Namespaces []struct {
			Name               string
			AuthorizationRules []fileRule
			Limits             *namespace.LimitsJSON
			Queues             []struct {
				Name       string
				Properties entityProps
			}
			Topics []struct {
				Name          string
				Properties    entityProps
				Subscriptions []struct {
					Name       string
					Properties entityProps
					Rules      []struct {
						Name       string
						Properties ruleProps
					}
				}
			}
		}
		Logging struct{ Type string }
	}
}

type entityProps struct {
	DeadLetteringOnMessageExpiration          *bool
	DeadLetteringOnFilterEvaluationExceptions *bool
	DefaultMessageTimeToLive                  string
	DuplicateDetectionHistoryTimeWindow       string
	ForwardDeadLetteredMessagesTo             string
	ForwardTo                                 string
	LockDuration                              string
	MaxDeliveryCount                          *int64
	RequiresDuplicateDetection                *bool
	RequiresSession                           *bool
	AutoDeleteOnIdle                          string
	MaxSizeInMegabytes                        *int64
	MaxMessageSizeInKilobytes                 *int64
	EnableBatchedOperations                   *bool
	Status                                    string
	UserMetadata                              string
	AuthorizationRules                        []fileRule
}

type ruleProps struct {
	FilterType        string
	CorrelationFilter *struct {
		ContentType      string
		CorrelationID    string `json:"CorrelationId"`
		Label            string
		MessageID        string `json:"MessageId"`
		ReplyTo          string
		ReplyToSessionID string `json:"ReplyToSessionId"`
		SessionID        string `json:"SessionId"`
		To               string
		Properties       map[string]any
	}
	SQLFilter *struct {
		SQLExpression string `json:"SqlExpression"`
	} `json:"SqlFilter"`
	Action *struct {
		SQLExpression string `json:"SqlExpression"`
	}
}

// Load reads and validates a Config.json. Errors name the entity and the
// property at fault.
func Load(r io.Reader) (*Config, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	data := stripComments(raw)
	pos, err := checkKeys(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var f fileConfig
	if err := dec.Decode(&f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, positionError(data, valueStart(data, te.Offset), fmt.Sprintf("%s must be %s, not a JSON %s", te.Field, te.Type, te.Value))
		}
		return nil, fmt.Errorf("emuconfig: %w", err)
	}
	ns := f.UserConfig.Namespaces
	if len(ns) == 0 {
		return nil, errors.New("emuconfig: UserConfig.Namespaces must hold at least one namespace")
	}
	c := &Config{Namespace: ns[0].Name, LoggingType: f.UserConfig.Logging.Type}
	seen := map[string]bool{}
	for i, n := range ns {
		if err := namespace.CheckName(n.Name); err != nil {
			return nil, fmt.Errorf("emuconfig: %w", err)
		}
		if seen[strings.ToLower(n.Name)] {
			return nil, fmt.Errorf("emuconfig: the namespace %q is defined twice", n.Name)
		}
		seen[strings.ToLower(n.Name)] = true
		out := Namespace{Name: n.Name}
		var err error
		if out.AuthorizationRules, err = authorizationRules("namespace '"+n.Name+"'", n.AuthorizationRules); err != nil {
			return nil, err
		}
		if n.Limits != nil {
			if out.Limits, err = n.Limits.Limits(); err != nil {
				var le *namespace.LimitError
				if errors.As(err, &le) {
					return nil, pos.errorf(limitPath(pos, i, le.Field), "%v", err)
				}
				return nil, err
			}
			out.HasLimits = true
		}
		var given [][]string // per entity, the properties the file sets
		for _, q := range n.Queues {
			e := core.Entity{Kind: core.KindQueue, Name: q.Name}
			g, err := q.Properties.apply(&e)
			if err != nil {
				return nil, err
			}
			out.Entities, given = append(out.Entities, e), append(given, g)
		}
		for _, t := range n.Topics {
			e := core.Entity{Kind: core.KindTopic, Name: t.Name}
			g, err := t.Properties.apply(&e)
			if err != nil {
				return nil, err
			}
			out.Entities, given = append(out.Entities, e), append(given, g)
			for _, s := range t.Subscriptions {
				se := core.Entity{Kind: core.KindSubscription, Topic: t.Name, Name: s.Name}
				g, err := s.Properties.apply(&se)
				if err != nil {
					return nil, err
				}
				for _, r := range s.Rules {
					rule, err := r.Properties.rule(r.Name)
					if err != nil {
						return nil, fmt.Errorf("emuconfig: subscription %q rule %q: %w", se.Path(), r.Name, err)
					}
					se.Rules = append(se.Rules, rule)
				}
				out.Entities, given = append(out.Entities, se), append(given, g)
			}
		}
		for i := range out.Entities {
			e := out.Entities[i]
			if err := e.ValidateGiven(given[i]...); err != nil {
				return nil, fmt.Errorf("emuconfig: %w", err)
			}
		}
		c.Namespaces = append(c.Namespaces, out)
	}
	c.Entities = c.Namespaces[0].Entities
	return c, nil
}

// limitPath is the path of namespace i's limit field as the file spells
// it (keys match without regard to case, as the decoder matches them).
func limitPath(pos positions, i int, field string) string {
	prefix := fmt.Sprintf("UserConfig.Namespaces[%d].", i)
	for p := range pos.at {
		if len(p) > len(prefix) && strings.EqualFold(p, prefix+"Limits."+field) {
			return p
		}
	}
	return prefix + "Limits." + field
}

// MinEmulatorDuplicateWindow is the emulator's smallest
// DuplicateDetectionHistoryTimeWindow. A window from it up to the cloud
// service's [core.MinDuplicateWindow] loads as core.MinDuplicateWindow, so
// that the emulator's files load; a duplicate is then remembered a few
// seconds longer than the file says.
const MinEmulatorDuplicateWindow = 5 * time.Second

// apply sets e's properties from p and returns the names of those the
// file sets (a zero there is refused, not read as the default).
func (p *entityProps) apply(e *core.Entity) ([]string, error) {
	where := func(prop string, err error) ([]string, error) {
		return nil, fmt.Errorf("emuconfig: %s %q: %s: %w", e.Kind, e.Path(), prop, err)
	}
	var given []string
	for _, d := range []struct {
		name string
		src  string
		set  func(v int64)
	}{
		{"DefaultMessageTimeToLive", p.DefaultMessageTimeToLive, func(v int64) { e.DefaultMessageTimeToLive = durationOf(v) }},
		{"DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow, func(v int64) { e.DuplicateDetectionHistoryTimeWindow = durationOf(v) }},
		{"LockDuration", p.LockDuration, func(v int64) { e.LockDuration = durationOf(v) }},
		{"AutoDeleteOnIdle", p.AutoDeleteOnIdle, func(v int64) { e.AutoDeleteOnIdle = durationOf(v) }},
	} {
		if d.src == "" {
			continue
		}
		v, err := ParseDuration(d.src)
		if err != nil {
			return where(d.name, err)
		}
		d.set(v)
		given = append(given, d.name)
	}
	if w := e.DuplicateDetectionHistoryTimeWindow; w >= MinEmulatorDuplicateWindow && w < core.MinDuplicateWindow {
		e.DuplicateDetectionHistoryTimeWindow = core.MinDuplicateWindow
	}
	setBool := func(dst *bool, src *bool) {
		if src != nil {
			*dst = *src
		}
	}
	setBool(&e.DeadLetteringOnMessageExpiration, p.DeadLetteringOnMessageExpiration)
	setBool(&e.DeadLetteringOnFilterEvaluationExceptions, p.DeadLetteringOnFilterEvaluationExceptions)
	setBool(&e.RequiresDuplicateDetection, p.RequiresDuplicateDetection)
	setBool(&e.RequiresSession, p.RequiresSession)
	setBool(&e.EnableBatchedOperations, p.EnableBatchedOperations)
	if p.MaxDeliveryCount != nil {
		if *p.MaxDeliveryCount < 1 || *p.MaxDeliveryCount > math.MaxInt32 {
			return where("MaxDeliveryCount", fmt.Errorf("must be between 1 and %d, got %d", math.MaxInt32, *p.MaxDeliveryCount))
		}
		e.MaxDeliveryCount = int32(*p.MaxDeliveryCount)
	}
	if p.MaxSizeInMegabytes != nil {
		e.MaxSizeInMegabytes = *p.MaxSizeInMegabytes
		given = append(given, "MaxSizeInMegabytes")
	}
	if p.MaxMessageSizeInKilobytes != nil {
		e.MaxMessageSizeInKilobytes = *p.MaxMessageSizeInKilobytes
		given = append(given, "MaxMessageSizeInKilobytes")
	}
	e.ForwardTo = p.ForwardTo
	e.ForwardDeadLetteredMessagesTo = p.ForwardDeadLetteredMessagesTo
	e.Status = core.EntityStatus(p.Status)
	e.UserMetadata = p.UserMetadata
	rules, err := authorizationRules(e.Kind.String()+" '"+e.Path()+"'", p.AuthorizationRules)
	if err != nil {
		return nil, err
	}
	e.AuthorizationRules = rules
	return given, nil
}

// authorizationRules reads the rules of a namespace or entity (owner, for
// errors). A rule in the file must give its PrimaryKey, so that its keys
// stay the same from one start to the next; a missing SecondaryKey is the
// PrimaryKey.
func authorizationRules(owner string, in []fileRule) ([]core.AuthorizationRule, error) {
	var out []core.AuthorizationRule
	for _, r := range in {
		rights, err := sas.ParseRights(r.Rights...)
		if err != nil {
			return nil, fmt.Errorf("emuconfig: %s: authorization rule %q: %w", owner, r.KeyName, err)
		}
		if r.PrimaryKey == "" {
			return nil, fmt.Errorf("emuconfig: %s: authorization rule %q needs a PrimaryKey (Config.json's keys must stay the same from one start to the next)", owner, r.KeyName)
		}
		if r.SecondaryKey == "" {
			r.SecondaryKey = r.PrimaryKey
		}
		out = append(out, core.AuthorizationRule{KeyName: r.KeyName, PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey, Rights: rights})
	}
	if err := core.ValidateAuthorizationRules(owner, out); err != nil {
		return nil, fmt.Errorf("emuconfig: %w", err)
	}
	return out, nil
}

func (p *ruleProps) rule(name string) (core.Rule, error) {
	r := core.Rule{Name: name}
	switch strings.ToLower(p.FilterType) {
	case "correlation", "correlationfilter":
		cf := p.CorrelationFilter
		if cf == nil {
			return r, fmt.Errorf("FilterType Correlation needs a CorrelationFilter object")
		}
		props := make(map[string]any, len(cf.Properties))
		for k, v := range cf.Properties {
			pv, err := jsonValue(v)
			if err != nil {
				return r, fmt.Errorf("CorrelationFilter.Properties[%q]: %w", k, err)
			}
			props[k] = pv
		}
		if len(props) == 0 {
			props = nil
		}
		r.Filter = core.Filter{Kind: core.FilterCorrelation, Correlation: &core.CorrelationFilter{
			ContentType: cf.ContentType, CorrelationID: cf.CorrelationID, Subject: cf.Label,
			MessageID: cf.MessageID, ReplyTo: cf.ReplyTo, ReplyToSessionID: cf.ReplyToSessionID,
			SessionID: cf.SessionID, To: cf.To, Properties: props,
		}}
	case "sql", "sqlfilter":
		if p.SQLFilter == nil || strings.TrimSpace(p.SQLFilter.SQLExpression) == "" {
			return r, fmt.Errorf("FilterType Sql needs SqlFilter.SqlExpression")
		}
		r.Filter = core.Filter{Kind: core.FilterSQL, SQL: p.SQLFilter.SQLExpression}
	default:
		return r, fmt.Errorf("FilterType %q is not Correlation or Sql", p.FilterType)
	}
	if p.Action != nil {
		r.Action = p.Action.SQLExpression
	}
	return r, r.Validate()
}

// jsonValue converts a decoded JSON property value into a typed one:
// integral numbers become int64, others float64.
func jsonValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, nil:
		return x, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	}
	return nil, fmt.Errorf("unsupported value %v (want string, number or boolean)", v)
}

// stripComments blanks out // and /* */ comments outside JSON strings,
// which the emulator's sample file uses. Each comment byte becomes a space
// (newlines stay), so offsets, lines and columns in the result are those
// of the file as written.
func stripComments(b []byte) []byte {
	out := bytes.Clone(b)
	inStr, esc := false, false
	blank := func(from, to int) {
		for j := from; j < to; j++ {
			if out[j] != '\n' {
				out[j] = ' '
			}
		}
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			end := bytes.IndexByte(b[i:], '\n')
			if end < 0 {
				end = len(b) - i
			}
			blank(i, i+end)
			i += end - 1
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				blank(i, len(b)) // unterminated: the decoder reports the missing rest
				return out
			}
			blank(i, i+2+end+2)
			i += 2 + end + 1
		}
	}
	return out
}
