package core

import (
	"strings"
	"time"
)

// FilterKind says which kind of [Filter] a rule has.
type FilterKind uint8

// Filter kinds.
const (
	FilterTrue FilterKind = iota
	FilterFalse
	FilterSQL
	FilterCorrelation
)

// DefaultRuleName is the name of the rule every new subscription gets.
const DefaultRuleName = "$Default"

// Filter is a rule's condition, as configured (compiled by the broker).
type Filter struct {
	Kind        FilterKind
	SQL         string             // FilterSQL
	Correlation *CorrelationFilter // FilterCorrelation
}

// CorrelationFilter matches when every set field equals the message's.
type CorrelationFilter struct {
	CorrelationID    string
	MessageID        string
	To               string
	ReplyTo          string
	Subject          string
	SessionID        string
	ReplyToSessionID string
	ContentType      string
	Properties       map[string]any
}

// Rule is a named filter plus an optional SQL action applied to matching
// messages' subscription copies.
type Rule struct {
	Name      string
	Filter    Filter
	Action    string // SQL rule action; "" for none
	CreatedAt time.Time
}

// DefaultRule returns the $Default rule: a true filter, no action.
func DefaultRule() Rule { return Rule{Name: DefaultRuleName, Filter: Filter{Kind: FilterTrue}} }

// Validate checks the rule's name (names.go: that of a subscription, or
// $Default) and compiles its filter and action.
func (r *Rule) Validate() error {
	if !strings.EqualFold(r.Name, DefaultRuleName) {
		if err := checkLeafName("rule", r.Name); err != nil {
			return err
		}
	}
	_, err := compileRule(r)
	return err
}
