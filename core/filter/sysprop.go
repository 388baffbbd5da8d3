package filter

import "strings"

// sysProp describes one system property that sys.Name may refer to.
type sysProp struct {
	name     string // canonical spelling, passed to [Message.System]
	settable bool   // may be the target of SET/REMOVE in a rule action
}

// sysProps lists the system properties of a Service Bus message, by their
// .NET BrokeredMessage names. Lookup is case-insensitive.
var sysProps = [...]sysProp{
	{"MessageId", true},
	{"CorrelationId", true},
	{"SessionId", true},
	{"ReplyToSessionId", true},
	{"To", true},
	{"ReplyTo", true},
	{"Label", true},
	{"ContentType", true},
	{"TimeToLive", true},
	{"ScheduledEnqueueTimeUtc", true},
	{"PartitionKey", true},
	{"ViaPartitionKey", true},
	{"SequenceNumber", false},
	{"EnqueuedSequenceNumber", false},
	{"EnqueuedTimeUtc", false},
	{"ExpiresAtUtc", false},
	{"LockedUntilUtc", false},
	{"LockToken", false},
	{"DeliveryCount", false},
	{"Size", false},
	{"DeadLetterSource", false},
	{"State", false},
}

// sysAliases maps newer SDK names to the canonical ones.
var sysAliases = [...]struct{ alias, name string }{
	{"Subject", "Label"},
}

// lookupSysProp finds a system property by case-insensitive name or alias.
func lookupSysProp(name string) (sysProp, bool) {
	for _, a := range sysAliases {
		if strings.EqualFold(a.alias, name) {
			name = a.name
			break
		}
	}
	for _, p := range sysProps {
		if strings.EqualFold(p.name, name) {
			return p, true
		}
	}
	return sysProp{}, false
}

// SystemPropertyNames returns the canonical names [Message.System] may be
// asked for, in a fixed order. The caller owns the returned slice.
func SystemPropertyNames() []string {
	names := make([]string, len(sysProps))
	for i, p := range sysProps {
		names[i] = p.name
	}
	return names
}
