package filter

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1=1", "1 = 1"},
		{"TRUE", "TRUE"},
		{"false", "FALSE"},
		{"color = 'red'", "color = 'red'"},
		{"user.color='red'", "color = 'red'"},
		{"USER.color <> 'red'", "color <> 'red'"},
		{"color != 'red'", "color <> 'red'"},
		{"sys.label = 'x'", "sys.Label = 'x'"},
		{"SYS.Subject = 'x'", "sys.Label = 'x'"},
		{"sys.[MessageId] = 'x'", "sys.MessageId = 'x'"},
		{"[my prop] = 1", "[my prop] = 1"},
		{"[a]]b] = 1", "[a]]b] = 1"},
		{`"Contoso & Northwind" = 1`, "[Contoso & Northwind] = 1"},
		{`"a""b" = 1`, `[a"b] = 1`},
		{"[and] = 1", "[and] = 1"},
		{"[x1] = 1", "x1 = 1"},
		{"größe > 2", "größe > 2"},
		{"s = 'it''s'", "s = 'it''s'"},
		{"a = 1.5e3", "a = 1500.0"},
		{"a = 101.5E5", "a = 1.015e+07"},
		{"a = 0.5E-2", "a = 0.005"},
		{"a = 2.0", "a = 2.0"},
		{"a = .5", "a = 0.5"},
		{"a = 5.", "a = 5.0"},
		{"a = -5", "a = -5"},
		{"a = +5", "a = 5"},
		{"a = -9223372036854775808", "a = -9223372036854775808"},
		{"a = - -5", "a = -(-5)"},
		{"a = -(b)", "a = -b"},
		{"a = -(-b)", "a = -(-b)"},
		{"a = -(5)", "a = -(5)"},
		{"a % ++0 = 0", "a % +(0) = 0"},
		{"a = - b * 2", "a = -b * 2"},
		{"a = 1 + 2 * 3", "a = 1 + 2 * 3"},
		{"a = (1 + 2) * 3", "a = (1 + 2) * 3"},
		{"a = 1 - (2 - 3)", "a = 1 - (2 - 3)"},
		{"a = (1 - 2) - 3", "a = 1 - 2 - 3"},
		{"a = 10 % 3 / 2", "a = 10 % 3 / 2"},
		{"a = 1 AND b = 2 OR c = 3", "a = 1 AND b = 2 OR c = 3"},
		{"a = 1 AND (b = 2 OR c = 3)", "a = 1 AND (b = 2 OR c = 3)"},
		{"(a = 1 AND b = 2) AND c = 3", "a = 1 AND b = 2 AND c = 3"},
		{"a = 1 AND (b = 2 AND c = 3)", "a = 1 AND (b = 2 AND c = 3)"},
		{"not a = 1", "NOT a = 1"},
		{"NOT (a = 1 OR b = 2)", "NOT (a = 1 OR b = 2)"},
		{"NOT NOT a = 1", "NOT NOT a = 1"},
		{"a like 'x%'", "a LIKE 'x%'"},
		{"a NOT LIKE 'x\\%' escape '\\'", "a NOT LIKE 'x\\%' ESCAPE '\\'"},
		{"a in ('x','y' , 'z')", "a IN ('x', 'y', 'z')"},
		{"a not in (1)", "a NOT IN (1)"},
		{"a IS NULL", "a IS NULL"},
		{"a is not null", "a IS NOT NULL"},
		{"exists(a)", "EXISTS(a)"},
		{"EXISTS ( sys.To )", "EXISTS(sys.To)"},
		{"NEWID() = a", "newid() = a"},
		{"p('x') = 1", "property('x') = 1"},
		{"property('sys.' + 'Label') = 'x'", "property('sys.' + 'Label') = 'x'"},
		{"flag", "flag"},
		{"flag AND NOT other", "flag AND NOT other"},
		{"sys = 1", "sys = 1"},
		{"a = NULL", "a = NULL"},
		{"a\n=\t1", "a = 1"},
		{"(((a = 1)))", "a = 1"},
	}
	for _, tt := range tests {
		f, err := Compile(tt.in)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.in, err)
			continue
		}
		got := f.String()
		if got != tt.want {
			t.Errorf("Compile(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		if f.Expression() != tt.in {
			t.Errorf("Compile(%q).Expression() = %q", tt.in, f.Expression())
		}
		// The canonical form is a fixed point.
		f2, err := Compile(got)
		if err != nil {
			t.Errorf("Compile(canonical %q): %v", got, err)
			continue
		}
		if f2.String() != got {
			t.Errorf("canonical form not stable: %q -> %q", got, f2.String())
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		in      string
		pos     int
		line    int
		col     int
		msgPart string
	}{
		{"", 0, 1, 1, "expected an expression"},
		{"a =", 3, 1, 4, "expected an expression"},
		{"a = 'x", 4, 1, 5, "unterminated string"},
		{"[a = 1", 0, 1, 1, "unterminated delimited identifier"},
		{`"a = 1`, 0, 1, 1, "unterminated quoted identifier"},
		{"a = 1 b", 6, 1, 7, "after end of expression"},
		{"a = 1)", 5, 1, 6, "after end of expression"},
		{"(a = 1", 6, 1, 7, "expected ')'"},
		{"a == 1", 3, 1, 4, "expected an expression"},
		{"a = 1\n  AND #", 12, 2, 7, "unexpected character '#'"},
		{"sys.Nope = 1", 4, 1, 5, "unknown system property"},
		{"sys. = 1", 5, 1, 6, "property name"},
		{"a = 12abc", 6, 1, 7, "invalid character"},
		{"a = 1e", 6, 1, 7, "exponent"},
		{"a = 9223372036854775808", 4, 1, 5, "out of range"},
		{"a = 1e999", 4, 1, 5, "out of range"},
		{"1", 0, 1, 1, "expected a predicate"},
		{"a + 1", 0, 1, 1, "expected a predicate"},
		{"'x'", 0, 1, 1, "expected a predicate"},
		{"a = 1 AND 2", 10, 1, 11, "expected a predicate"},
		{"NOT 'x'", 4, 1, 5, "expected a predicate"},
		{"(a = 1) + 2 = 3", 0, 1, 1, "expected a value"},
		{"a = (b = 1)", 4, 1, 5, "expected a value"},
		{"a = b = c", 6, 1, 7, "after end of expression"},
		{"a IS 1", 5, 1, 6, "NULL after IS"},
		{"a NOT = 1", 6, 1, 7, "LIKE or IN after NOT"},
		{"a IN ()", 6, 1, 7, "expected an expression"},
		{"a IN (1,)", 8, 1, 9, "expected an expression"},
		{"a IN 1", 5, 1, 6, "'(' after IN"},
		{"a IN (1 2)", 8, 1, 9, "',' or ')'"},
		{"a LIKE 1", 7, 1, 8, "pattern must be a string"},
		{"a LIKE 'x' ESCAPE 'ab'", 18, 1, 19, "single character"},
		{"a LIKE 'x\\' ESCAPE '\\'", 7, 1, 8, "ends with the escape character"},
		{"EXISTS a", 7, 1, 8, "'(' after EXISTS"},
		{"EXISTS(1)", 7, 1, 8, "property name"},
		{"foo(1) = 1", 0, 1, 1, "unknown function"},
		{"newid(1) = 1", 6, 1, 7, "')' after newid("},
		{"property(1) = 1", 9, 1, 10, "string name"},
		{"[] = 1", 0, 1, 1, "empty property name"},
		{"AND = 1", 0, 1, 1, "expected an expression"},
		{"a = 1 OR", 8, 1, 9, "expected an expression"},
		{"größe = 'ü", 10, 1, 9, "unterminated string"},
		{strings.Repeat("a", MaxExpressionLength+1), MaxExpressionLength, 1, MaxExpressionLength + 1, "longer than"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Compile(%q) error = %v, want *ParseError", tt.in, err)
			continue
		}
		if pe.Pos != tt.pos || pe.Line != tt.line || pe.Column != tt.col {
			t.Errorf("Compile(%q) error at %d (%d:%d), want %d (%d:%d): %v", tt.in, pe.Pos, pe.Line, pe.Column, tt.pos, tt.line, tt.col, pe)
		}
		if !strings.Contains(pe.Msg, tt.msgPart) {
			t.Errorf("Compile(%q) error %q, want it to mention %q", tt.in, pe.Msg, tt.msgPart)
		}
		if !strings.HasPrefix(err.Error(), "filter: ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
}
