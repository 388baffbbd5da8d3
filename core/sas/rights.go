package sas

import (
	"fmt"
	"strings"
)

// Rights is a set of Service Bus claims. [Manage] implies [Send] and
// [Listen]: use [Rights.Has] rather than testing bits directly.
type Rights uint8

// The three Service Bus claims.
const (
	Listen Rights = 1 << iota // receive, settle, renew locks, peek
	Send                      // send and schedule messages
	Manage                    // create, update, delete and list entities; implies Send and Listen
)

// allRights is every bit that has a meaning.
const allRights = Listen | Send | Manage

// Effective returns r with the rights implied by [Manage] added.
func (r Rights) Effective() Rights {
	if r&Manage != 0 {
		r |= Send | Listen
	}
	return r & allRights
}

// Has reports whether r grants every right in need, taking into account
// that [Manage] implies [Send] and [Listen]. Every set has the empty set.
func (r Rights) Has(need Rights) bool {
	return r.Effective()&need == need
}

// String lists the rights in the order Manage, Send, Listen, separated by
// commas, like the Service Bus error texts ("Manage,Send"). The empty set is
// "None".
func (r Rights) String() string {
	if r&allRights == 0 {
		return "None"
	}
	var names []string
	if r&Manage != 0 {
		names = append(names, "Manage")
	}
	if r&Send != 0 {
		names = append(names, "Send")
	}
	if r&Listen != 0 {
		names = append(names, "Listen")
	}
	return strings.Join(names, ",")
}

// ParseRights parses right names ("Listen", "Send", "Manage",
// case-insensitive). Each argument may itself hold several names separated
// by commas, spaces or '|', so both the emulator config's list form
// (["Manage","Send"]) and a single "Manage, Send" string work. No names give
// the empty set.
func ParseRights(names ...string) (Rights, error) {
	var r Rights
	for _, s := range names {
		fields := strings.FieldsFunc(s, func(c rune) bool {
			return c == ',' || c == '|' || c == ' ' || c == '\t'
		})
		for _, f := range fields {
			switch {
			case strings.EqualFold(f, "Listen"):
				r |= Listen
			case strings.EqualFold(f, "Send"):
				r |= Send
			case strings.EqualFold(f, "Manage"):
				r |= Manage
			default:
				return 0, fmt.Errorf("sas: unknown right %q (want Listen, Send or Manage)", f)
			}
		}
	}
	return r, nil
}
