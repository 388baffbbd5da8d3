package filter

// CorrelationFilter matches messages whose system and application
// properties equal the set fields. Empty strings and a nil Properties map
// mean "any". Service Bus requires at least one field to be set; see
// [CorrelationFilter.IsEmpty].
//
// System fields compare as exact, case-sensitive strings; a message whose
// property is unset or not a string does not match. Property values compare
// by value: integers and floats of any width are equal when numerically
// equal, strings exactly, booleans, times, binaries and UUIDs by content.
// A string never equals a number ("2" does not match 2), as in Service Bus.
// A nil value in Properties matches a property that is present with a nil
// value.
type CorrelationFilter struct {
	CorrelationID    string
	MessageID        string
	To               string
	ReplyTo          string
	Subject          string // system property Label; Subject in newer SDKs
	SessionID        string
	ReplyToSessionID string
	ContentType      string
	Properties       map[string]any
}

// Match reports whether every set field of f equals the message's. The
// error is always nil; it is there to satisfy [Filter].
func (f *CorrelationFilter) Match(m Message) (bool, error) {
	return f.systemMatch(m) && f.propertiesMatch(m), nil
}

// IsEmpty reports whether no field is set, in which case f matches every
// message. Service Bus rejects such a filter when a rule is created.
func (f *CorrelationFilter) IsEmpty() bool {
	return f.CorrelationID == "" && f.MessageID == "" && f.To == "" && f.ReplyTo == "" &&
		f.Subject == "" && f.SessionID == "" && f.ReplyToSessionID == "" && f.ContentType == "" &&
		len(f.Properties) == 0
}

func (f *CorrelationFilter) systemMatch(m Message) bool {
	return sysEquals(m, "CorrelationId", f.CorrelationID) &&
		sysEquals(m, "MessageId", f.MessageID) &&
		sysEquals(m, "To", f.To) &&
		sysEquals(m, "ReplyTo", f.ReplyTo) &&
		sysEquals(m, "Label", f.Subject) &&
		sysEquals(m, "SessionId", f.SessionID) &&
		sysEquals(m, "ReplyToSessionId", f.ReplyToSessionID) &&
		sysEquals(m, "ContentType", f.ContentType)
}

// sysEquals reports whether system property name equals want; an empty
// want always matches.
func sysEquals(m Message, name, want string) bool {
	if want == "" {
		return true
	}
	got := readProp(m, true, name)
	return got.k == kindString && got.s == want
}

func (f *CorrelationFilter) propertiesMatch(m Message) bool {
	for name, want := range f.Properties {
		got, ok := m.Property(name)
		if !ok || !valuesEqual(fromAny(got), fromAny(want)) {
			return false
		}
	}
	return true
}
