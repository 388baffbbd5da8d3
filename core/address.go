package core

import "strings"

// Address is a parsed entity path as the fronts receive it: a queue, a
// topic, a subscription, or the dead-letter subqueue of a queue or
// subscription.
type Address struct {
	Entity     string // queue or topic name
	Sub        string // subscription name, "" if none
	DeadLetter bool   // the $DeadLetterQueue subqueue
}

const (
	dlqSuffix = "/$deadletterqueue"
	subsInfix = "/subscriptions/"
)

// ParseAddress splits a path such as "orders", "orders/$DeadLetterQueue",
// "events/Subscriptions/billing" or
// "events/subscriptions/billing/$deadletterqueue". Matching of the
// reserved segments is case-insensitive; a leading '/' is ignored.
func ParseAddress(path string) Address {
	p := strings.Trim(path, "/")
	var a Address
	lower := strings.ToLower(p)
	if strings.HasSuffix(lower, dlqSuffix) {
		a.DeadLetter = true
		p = p[:len(p)-len(dlqSuffix)]
		lower = lower[:len(lower)-len(dlqSuffix)]
	}
	if i := strings.LastIndex(lower, subsInfix); i >= 0 {
		a.Entity = p[:i]
		a.Sub = p[i+len(subsInfix):]
		return a
	}
	a.Entity = p
	return a
}

// String returns the canonical path.
func (a Address) String() string {
	s := a.Entity
	if a.Sub != "" {
		s += "/Subscriptions/" + a.Sub
	}
	if a.DeadLetter {
		s += "/$DeadLetterQueue"
	}
	return s
}

// key is the case-insensitive lookup key of the entity (not the subqueue).
func (a Address) key() string {
	if a.Sub != "" {
		return entityKey(a.Entity + "/Subscriptions/" + a.Sub)
	}
	return entityKey(a.Entity)
}

func entityKey(path string) string { return strings.ToLower(path) }
