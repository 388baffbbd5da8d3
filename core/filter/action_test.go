package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAction(t *testing.T) {
	tests := []struct {
		expr      string
		canonical string
		wantSys   map[string]any
		wantProps map[string]any
	}{
		{
			expr:      "SET color = 'blue'",
			canonical: "SET color = 'blue'",
			wantProps: map[string]any{"color": "blue", "quantity": 15, "secret": "s"},
		},
		{
			expr:      "set quantity = quantity + 1; remove secret;",
			canonical: "SET quantity = quantity + 1; REMOVE secret",
			wantProps: map[string]any{"color": "red", "quantity": int64(16)},
		},
		{
			// The separator is optional, and later statements see earlier ones.
			expr:      "SET a = 1 SET b = a * 2.5 SET user.c = b + a",
			canonical: "SET a = 1; SET b = a * 2.5; SET c = b + a",
			wantProps: map[string]any{"color": "red", "quantity": 15, "secret": "s", "a": int64(1), "b": 2.5, "c": 3.5},
		},
		{
			expr:      "SET sys.Label = sys.Label + '.routed'; SET [orig label] = sys.Subject",
			canonical: "SET sys.Label = sys.Label + '.routed'; SET [orig label] = sys.Label",
			wantSys:   map[string]any{"Label": "orders.routed", "MessageId": "m-1"},
			wantProps: map[string]any{"color": "red", "quantity": 15, "secret": "s", "orig label": "orders.routed"},
		},
		{
			// Copying a property keeps its Go type; missing sets nil.
			expr:      "SET copy = quantity; SET gone = missing",
			canonical: "SET copy = quantity; SET gone = missing",
			wantProps: map[string]any{"color": "red", "quantity": 15, "secret": "s", "copy": 15, "gone": nil},
		},
		{
			expr:      "REMOVE sys.Label",
			canonical: "REMOVE sys.Label",
			wantSys:   map[string]any{"MessageId": "m-1"},
			wantProps: map[string]any{"color": "red", "quantity": 15, "secret": "s"},
		},
		{
			expr:      "REMOVE missing",
			canonical: "REMOVE missing",
			wantProps: map[string]any{"color": "red", "quantity": 15, "secret": "s"},
		},
	}
	for _, tt := range tests {
		a, err := CompileAction(tt.expr)
		if err != nil {
			t.Errorf("CompileAction(%q): %v", tt.expr, err)
			continue
		}
		if got := a.String(); got != tt.canonical {
			t.Errorf("CompileAction(%q).String() = %q, want %q", tt.expr, got, tt.canonical)
		}
		if a.Expression() != tt.expr {
			t.Errorf("Expression() = %q, want %q", a.Expression(), tt.expr)
		}
		m := newTestMessage(
			map[string]any{"Label": "orders", "MessageId": "m-1"},
			map[string]any{"color": "red", "quantity": 15, "secret": "s"})
		if err := a.Apply(m); err != nil {
			t.Errorf("Apply(%q): %v", tt.expr, err)
			continue
		}
		wantSys := tt.wantSys
		if wantSys == nil {
			wantSys = map[string]any{"Label": "orders", "MessageId": "m-1"}
		}
		if diff := cmp.Diff(wantSys, m.sys); diff != "" {
			t.Errorf("Apply(%q) system properties (-want +got):\n%s", tt.expr, diff)
		}
		if diff := cmp.Diff(tt.wantProps, m.props); diff != "" {
			t.Errorf("Apply(%q) properties (-want +got):\n%s", tt.expr, diff)
		}
	}
}

func TestActionNewID(t *testing.T) {
	a, err := CompileAction("SET id = newid()")
	if err != nil {
		t.Fatal(err)
	}
	m1, m2 := newTestMessage(nil, nil), newTestMessage(nil, nil)
	if err := a.Apply(m1); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(m2); err != nil {
		t.Fatal(err)
	}
	id1, ok1 := m1.props["id"].([16]byte)
	id2, ok2 := m2.props["id"].([16]byte)
	if !ok1 || !ok2 {
		t.Fatalf("newid() stored %T and %T, want [16]byte", m1.props["id"], m2.props["id"])
	}
	if id1 == id2 {
		t.Errorf("two newid() calls gave the same id %x", id1)
	}
	if id1[6]>>4 != 4 || id1[8]>>6 != 2 {
		t.Errorf("newid() %x is not a version 4 RFC 4122 UUID", id1)
	}
}

func TestActionApplyErrors(t *testing.T) {
	tests := []struct {
		expr string
		eval bool // *EvalError rather than a SetSystem error
	}{
		{"SET x = flag + 1", true},
		{"SET sys.Label = 5", false},
		{"SET sys.TimeToLive = 5", false},
		{"SET a = 1; SET b = 1 / zero", true},
	}
	for _, tt := range tests {
		a, err := CompileAction(tt.expr)
		if err != nil {
			t.Fatalf("CompileAction(%q): %v", tt.expr, err)
		}
		err = a.Apply(newTestMessage(nil, map[string]any{"flag": true, "zero": 0}))
		if err == nil {
			t.Errorf("Apply(%q) succeeded, want an error", tt.expr)
			continue
		}
		var ee *EvalError
		if errors.As(err, &ee) != tt.eval {
			t.Errorf("Apply(%q) error %v: *EvalError = %v, want %v", tt.expr, err, !tt.eval, tt.eval)
		}
		if !strings.HasPrefix(err.Error(), "filter: ") {
			t.Errorf("Apply(%q) error %q lacks the package prefix", tt.expr, err)
		}
	}
}

func TestCompileActionErrors(t *testing.T) {
	tests := []struct {
		expr    string
		pos     int
		msgPart string
	}{
		{"", 0, "SET or REMOVE"},
		{";", 0, "SET or REMOVE"},
		{"SET", 3, "property name"},
		{"SET a", 5, "'=' after SET target"},
		{"SET a = ", 8, "expected an expression"},
		{"SET a = 1;;", 10, "SET or REMOVE"},
		{"SET a = b = 1", 10, "SET or REMOVE"},
		{"SET a = (b = 1)", 8, "expected a value"},
		{"UPDATE a = 1", 0, "SET or REMOVE"},
		{"REMOVE 1", 7, "property name"},
		{"SET sys.SequenceNumber = 1", 4, "cannot SET system property SequenceNumber"},
		{"REMOVE sys.EnqueuedTimeUtc", 7, "cannot REMOVE system property"},
		{"SET sys.Bogus = 1", 8, "unknown system property"},
		{strings.Repeat("SET a = 1;", MaxActionStatements) + "SET b = 2", 10 * MaxActionStatements, "more than 32 statements"},
	}
	for _, tt := range tests {
		_, err := CompileAction(tt.expr)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("CompileAction(%q) error = %v, want *ParseError", tt.expr, err)
			continue
		}
		if pe.Pos != tt.pos || !strings.Contains(pe.Msg, tt.msgPart) {
			t.Errorf("CompileAction(%q) error at %d %q, want %d mentioning %q", tt.expr, pe.Pos, pe.Msg, tt.pos, tt.msgPart)
		}
	}
}
