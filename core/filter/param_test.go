package filter

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileWithParameters(t *testing.T) {
	params := map[string]any{
		"@source": "orders",
		"@Min":    int32(10),
		"@ratio":  0.5,
		"@on":     true,
	}
	tests := []struct {
		expr, canonical, want string
	}{
		{"source = @source", "source = @source", "true"},
		{"quantity > @min", "quantity > @min", "true"}, // case-insensitive fallback
		{"quantity * @ratio = 7.5", "quantity * @ratio = 7.5", "true"},
		{"@on AND source LIKE @source", "@on AND source LIKE @source", "true"},
		{"source IN (@source, 'x')", "source IN (@source, 'x')", "true"},
	}
	m := newTestMessage(nil, map[string]any{"source": "orders", "quantity": 15})
	for _, tt := range tests {
		f, err := CompileWithParameters(tt.expr, params)
		if err != nil {
			t.Errorf("CompileWithParameters(%q): %v", tt.expr, err)
			continue
		}
		if got := f.String(); got != tt.canonical {
			t.Errorf("String() = %q, want %q", got, tt.canonical)
		}
		if got := truthOf(f, m); got != tt.want {
			t.Errorf("%q = %s, want %s", tt.expr, got, tt.want)
		}
	}
}

func TestParameterErrors(t *testing.T) {
	tests := []struct {
		expr    string
		params  map[string]any
		pos     int
		msgPart string
	}{
		{"a = @p", nil, 4, "parameter @p has no value"},
		{"a = @p", map[string]any{"@q": 1}, 4, "has no value"},
		{"a = @", nil, 4, "must start a parameter name"},
		{"a = @p", map[string]any{"@p": struct{}{}}, 4, "unsupported type"},
	}
	for _, tt := range tests {
		_, err := CompileWithParameters(tt.expr, tt.params)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Pos != tt.pos || !strings.Contains(pe.Msg, tt.msgPart) {
			t.Errorf("CompileWithParameters(%q) = %v, want error at %d mentioning %q", tt.expr, err, tt.pos, tt.msgPart)
		}
	}
}

func TestActionParameters(t *testing.T) {
	a, err := CompileActionWithParameters("SET source = @dest; SET n = @n", map[string]any{"@dest": "routed", "@n": int16(3)})
	if err != nil {
		t.Fatal(err)
	}
	m := newTestMessage(nil, map[string]any{"source": "orders"})
	if err := a.Apply(m); err != nil {
		t.Fatal(err)
	}
	if m.props["source"] != "routed" {
		t.Errorf("source = %v, want routed", m.props["source"])
	}
	if n, ok := m.props["n"].(int16); !ok || n != 3 {
		t.Errorf("n = %#v, want int16(3): a parameter keeps its Go type", m.props["n"])
	}
}
