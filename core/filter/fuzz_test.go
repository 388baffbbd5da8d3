package filter

import (
	"errors"
	"maps"
	"testing"
)

// FuzzCompile feeds arbitrary text to Compile and CompileAction. Neither
// may panic; errors must be *ParseError with a position inside the input;
// compiled filters and actions must evaluate against a sample message
// without panicking; and the canonical String form must compile to itself
// and mean the same thing. The seed corpus lives in testdata/fuzz/FuzzCompile.
func FuzzCompile(f *testing.F) {
	f.Add(benchExpr)
	f.Add("SET a = 1; REMOVE b")
	f.Fuzz(func(t *testing.T, expr string) {
		sample := sampleMessage()
		if flt, err := Compile(expr); err != nil {
			checkParseError(t, expr, err)
		} else {
			checkFilter(t, flt, sample)
		}
		if act, err := CompileAction(expr); err != nil {
			checkParseError(t, expr, err)
		} else {
			checkAction(t, act, sample)
		}
	})
}

func checkParseError(t *testing.T, expr string, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("%q: error %T %v, want *ParseError", expr, err, err)
	}
	if pe.Pos < 0 || pe.Pos > len(expr) || pe.Line < 1 || pe.Column < 1 {
		t.Fatalf("%q: error position %d (%d:%d) out of range", expr, pe.Pos, pe.Line, pe.Column)
	}
}

func checkFilter(t *testing.T, flt *SQLFilter, m Message) {
	t.Helper()
	got := truthOf(flt, m)
	if _, err := flt.Match(m); err != nil {
		var ee *EvalError
		if !errors.As(err, &ee) {
			t.Fatalf("%q: Match error %T %v, want *EvalError", flt.Expression(), err, err)
		}
	}
	canon := flt.String()
	if len(canon) > MaxExpressionLength {
		return // spaces the canonical form adds may push it over the limit
	}
	again, err := Compile(canon)
	if err != nil {
		t.Fatalf("%q: canonical form %q does not compile: %v", flt.Expression(), canon, err)
	}
	if again.String() != canon {
		t.Fatalf("%q: canonical form %q is not stable: %q", flt.Expression(), canon, again.String())
	}
	if got2 := truthOf(again, m); got2 != got {
		t.Fatalf("%q = %s but canonical %q = %s", flt.Expression(), got, canon, got2)
	}
}

func checkAction(t *testing.T, act *Action, sample *testMessage) {
	t.Helper()
	m := &testMessage{sys: maps.Clone(sample.sys), props: maps.Clone(sample.props)}
	if err := act.Apply(m); err != nil && err.Error() == "" {
		t.Fatalf("%q: empty error", act.Expression())
	}
	canon := act.String()
	if len(canon) > MaxExpressionLength {
		return
	}
	again, err := CompileAction(canon)
	if err != nil {
		t.Fatalf("%q: canonical form %q does not compile: %v", act.Expression(), canon, err)
	}
	if again.String() != canon {
		t.Fatalf("%q: canonical form %q is not stable: %q", act.Expression(), canon, again.String())
	}
}
