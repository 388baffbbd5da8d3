package filter

import "strings"

// Message gives a filter read access to one message.
type Message interface {
	// System returns a system (broker) property by its canonical Service
	// Bus name, one of [SystemPropertyNames] (for example "MessageId",
	// "Label", "SequenceNumber"). ok is false when the property is unset.
	System(name string) (v any, ok bool)
	// Property returns an application property by the name written in the
	// expression. ok is false when the message has no such property.
	// Service Bus treats property names as case-insensitive; a Message that
	// wants the same must fold case itself.
	Property(name string) (v any, ok bool)
}

// MutableMessage is a [Message] that rule actions can change. The broker
// passes the subscription's own copy of the message.
type MutableMessage interface {
	Message
	// SetSystem sets a system property named as for [Message.System]; v is
	// nil to clear it. It returns an error when the broker does not allow
	// the change (for example a wrong type for the property).
	SetSystem(name string, v any) error
	// SetProperty sets an application property, adding it if absent.
	SetProperty(name string, v any)
	// RemoveProperty deletes an application property; absent is not an error.
	RemoveProperty(name string)
}

// Filter decides whether a message belongs to a subscription. Every filter
// kind in this package implements it, so a subscription can hold []Filter.
// Implementations are safe for concurrent use.
type Filter interface {
	// Match reports whether m passes the filter. A non-nil error means the
	// filter could not be evaluated for m (Service Bus "filter evaluation
	// exception"); matched is then false.
	Match(m Message) (matched bool, err error)
}

// TrueFilter matches every message. Its SQL form is "1=1".
type TrueFilter struct{}

// Match always reports true.
func (TrueFilter) Match(Message) (bool, error) { return true, nil }

// String returns "1=1", the expression Service Bus shows for a TrueFilter.
func (TrueFilter) String() string { return "1=1" }

// FalseFilter matches no message. Its SQL form is "1=0".
type FalseFilter struct{}

// Match always reports false.
func (FalseFilter) Match(Message) (bool, error) { return false, nil }

// String returns "1=0", the expression Service Bus shows for a FalseFilter.
func (FalseFilter) String() string { return "1=0" }

// SQLFilter is a compiled SQL filter expression. It is immutable and safe
// for concurrent use; evaluate it as often as needed.
type SQLFilter struct {
	expr string
	root node
}

// Compile parses a SQL filter expression. Errors are *[ParseError].
func Compile(expr string) (*SQLFilter, error) {
	return CompileWithParameters(expr, nil)
}

// CompileWithParameters parses a SQL filter expression whose @name
// parameters take their values from params (the Parameters of a Service Bus
// SqlFilter). Keys include the '@'; values have the types of application
// properties. A parameter without a value is a *[ParseError].
func CompileWithParameters(expr string, params map[string]any) (*SQLFilter, error) {
	p, err := newParser(expr, params)
	if err != nil {
		return nil, err
	}
	start := p.peek().pos
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if err := p.expectEOF(); err != nil {
		return nil, err
	}
	if err := p.checkLogical(root, start); err != nil {
		return nil, err
	}
	return &SQLFilter{expr: expr, root: root}, nil
}

// Match evaluates the filter against m. It reports true only when the
// expression is TRUE; FALSE and unknown (for example a comparison with a
// missing property) do not match. Errors are *[EvalError].
func (f *SQLFilter) Match(m Message) (bool, error) {
	t, err := f.root.test(m)
	return t == triTrue && err == nil, err
}

// Expression returns the source text the filter was compiled from.
func (f *SQLFilter) Expression() string { return f.expr }

// String returns the canonical form of the expression: keywords in upper
// case, system properties as sys.CanonicalName, user properties bare or in
// [brackets], and only the parentheses precedence requires. Compiling the
// canonical form yields the same canonical form.
func (f *SQLFilter) String() string {
	var b strings.Builder
	f.root.format(&b)
	return b.String()
}

// Compile-time checks that every filter kind implements Filter.
var (
	_ Filter = TrueFilter{}
	_ Filter = FalseFilter{}
	_ Filter = (*SQLFilter)(nil)
	_ Filter = (*CorrelationFilter)(nil)
)
