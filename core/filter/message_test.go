package filter

import (
	"fmt"
	"maps"
)

// testMessage is a map-backed MutableMessage for tests and benchmarks.
type testMessage struct {
	sys   map[string]any
	props map[string]any
}

func newTestMessage(sys, props map[string]any) *testMessage {
	m := &testMessage{sys: map[string]any{}, props: map[string]any{}}
	maps.Copy(m.sys, sys)
	maps.Copy(m.props, props)
	return m
}

func (m *testMessage) System(name string) (any, bool) {
	v, ok := m.sys[name]
	return v, ok
}

func (m *testMessage) Property(name string) (any, bool) {
	v, ok := m.props[name]
	return v, ok
}

// SetSystem accepts strings (or nil) for the string-typed properties and
// rejects everything else, like a broker would.
func (m *testMessage) SetSystem(name string, v any) error {
	switch name {
	case "MessageId", "CorrelationId", "SessionId", "ReplyToSessionId", "To", "ReplyTo", "Label", "ContentType", "PartitionKey":
		if v == nil {
			delete(m.sys, name)
			return nil
		}
		if _, ok := v.(string); !ok {
			return fmt.Errorf("sys.%s must be a string, got %T", name, v)
		}
		m.sys[name] = v
		return nil
	}
	return fmt.Errorf("sys.%s cannot be set by this test message", name)
}

func (m *testMessage) SetProperty(name string, v any) { m.props[name] = v }
func (m *testMessage) RemoveProperty(name string)     { delete(m.props, name) }

// truthOf evaluates a compiled filter three-valued, for tests: "true",
// "false", "unknown" or "error".
func truthOf(f *SQLFilter, m Message) string {
	t, err := f.root.test(m)
	switch {
	case err != nil:
		return "error"
	case t == triUnknown:
		return "unknown"
	case t == triTrue:
		return "true"
	}
	return "false"
}
