package filter

import "testing"

// truthMessage has t (TRUE), f (FALSE) and no u, so "u" is unknown.
var truthMessage = newTestMessage(nil, map[string]any{"t": true, "f": false})

func TestThreeValuedLogic(t *testing.T) {
	vals := []struct{ expr, name string }{{"t", "T"}, {"f", "F"}, {"u", "U"}}
	// Service Bus truth tables (SQL filter syntax, "Unknown evaluation").
	and := map[string]string{
		"TT": "true", "TF": "false", "TU": "unknown",
		"FT": "false", "FF": "false", "FU": "false",
		"UT": "unknown", "UF": "false", "UU": "unknown",
	}
	or := map[string]string{
		"TT": "true", "TF": "true", "TU": "true",
		"FT": "true", "FF": "false", "FU": "unknown",
		"UT": "true", "UF": "unknown", "UU": "unknown",
	}
	for _, a := range vals {
		for _, b := range vals {
			key := a.name + b.name
			for op, table := range map[string]map[string]string{"AND": and, "OR": or} {
				expr := a.expr + " " + op + " " + b.expr
				f, err := Compile(expr)
				if err != nil {
					t.Fatalf("Compile(%q): %v", expr, err)
				}
				if got := truthOf(f, truthMessage); got != table[key] {
					t.Errorf("%s %s %s = %s, want %s", a.name, op, b.name, got, table[key])
				}
			}
		}
	}
	not := map[string]string{"T": "false", "F": "true", "U": "unknown"}
	for _, a := range vals {
		f, err := Compile("NOT " + a.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := truthOf(f, truthMessage); got != not[a.name] {
			t.Errorf("NOT %s = %s, want %s", a.name, got, not[a.name])
		}
	}
}

// TestUnknownPropagation checks the operators the Service Bus reference
// says turn an unknown operand into an unknown result.
func TestUnknownPropagation(t *testing.T) {
	for _, expr := range []string{
		"u + 1 = 1", "1 - u = 1", "u * 2 = 1", "u / 2 = 1", "u % 2 = 1", "-u = 1", "+u = 1",
		"u = 1", "1 <> u", "u < 1", "u <= 1", "u > 1", "u >= 1",
		"u LIKE 'a'", "u NOT LIKE 'a'", "'a' LIKE u", "'a' LIKE 'a' ESCAPE u",
		"u IN (1)", "u NOT IN (1)",
		"NOT (u = 1)", "u = 1 AND u = 1", "u = 1 OR u = 1",
	} {
		f, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if got := truthOf(f, truthMessage); got != "unknown" {
			t.Errorf("%s = %s, want unknown", expr, got)
		}
		if ok, err := f.Match(truthMessage); ok || err != nil {
			t.Errorf("Match(%s) = %v, %v; want false, nil", expr, ok, err)
		}
	}
}
