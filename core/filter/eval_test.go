package filter

import (
	"errors"
	"math"
	"testing"
	"time"
)

type colorName string // a named string type, as a broker might use

// sampleMessage carries one property of every supported type.
func sampleMessage() *testMessage {
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	return newTestMessage(map[string]any{
		"MessageId":       "m-1",
		"Label":           "orders.created",
		"To":              "Store5",
		"ContentType":     "application/json",
		"SequenceNumber":  int64(42),
		"DeliveryCount":   int32(1),
		"EnqueuedTimeUtc": t0,
		"TimeToLive":      90 * time.Second,
	}, map[string]any{
		"color":    "red",
		"quantity": 15,
		"i8":       int8(-3),
		"u16":      uint16(7),
		"u32":      uint32(10),
		"big":      uint64(math.MaxUint64),
		"price":    12.5,
		"f32":      float32(0.5),
		"flag":     true,
		"off":      false,
		"nothing":  nil,
		"when":     t0,
		"data":     []byte{1, 2, 3},
		"data2":    []byte{1, 2, 3},
		"id":       [16]byte{1},
		"id2":      [16]byte{1},
		"named":    colorName("red"),
		"nan":      math.NaN(),
		"zero":     0,
		"str10":    "10",
		"pct":      "100%",
		"weird":    struct{}{},
		"name":     "color",
		"sysname":  "sys.Label",
	})
}

func TestEval(t *testing.T) {
	tests := []struct{ expr, want string }{
		// constants and the default rule forms
		{"1=1", "true"},
		{"1=0", "false"},
		{"TRUE", "true"},
		{"FALSE", "false"},
		{"NULL = NULL", "unknown"},
		// strings
		{"color = 'red'", "true"},
		{"color = 'RED'", "false"},
		{"color <> 'blue'", "true"},
		{"color < 's'", "true"},
		{"named = 'red'", "true"},
		{"'a' + 'b' = 'ab'", "true"},
		{"color + 1 = 'red1'", "true"},
		{"color + flag = 'redTrue'", "true"},
		// numeric promotion across widths
		{"quantity = 15", "true"},
		{"quantity > 10", "true"},
		{"quantity = 15.0", "true"},
		{"quantity >= 15.0 AND quantity <= 15", "true"},
		{"i8 < 0", "true"},
		{"u16 = 7", "true"},
		{"u32 / 4 = 2", "true"},
		{"u32 / 4.0 = 2.5", "true"},
		{"u32 % 3 = 1", "true"},
		{"-u32 = -10", "true"},
		{"price * 2 = 25", "true"},
		{"price % 5 = 2.5", "true"},
		{"f32 = 0.5", "true"},
		{"big > 9223372036854775807", "true"},
		{"big > 1.0", "true"},
		{"big = 18446744073709551615.0", "true"},
		{"-9223372036854775808 - 1 = 9223372036854775807", "true"},
		{"7 / 2 = 3", "true"},
		{"-7 / 2 = -3", "true"},
		{"-7 % 2 = -1", "true"},
		{"1 / 0.0 > 1e308", "true"},
		{"nan = nan", "false"},
		{"nan <> 1", "true"},
		{"nan < 1", "false"},
		// mixed types
		{"str10 = 10", "false"},
		{"str10 <> 10", "true"},
		{"str10 > 5", "unknown"},
		{"flag = 1", "false"},
		{"flag = TRUE", "true"},
		{"flag <> off", "true"},
		{"flag > off", "unknown"},
		{"weird = weird", "false"},
		{"data = data2", "true"},
		{"id = id2", "true"},
		{"id = newid()", "false"},
		{"newid() = newid()", "false"},
		{"when = sys.EnqueuedTimeUtc", "true"},
		{"when < sys.EnqueuedTimeUtc + sys.TimeToLive", "true"},
		{"sys.EnqueuedTimeUtc - when = sys.TimeToLive - sys.TimeToLive", "true"},
		// booleans as predicates
		{"flag", "true"},
		{"off", "false"},
		{"NOT flag", "false"},
		{"missing", "unknown"},
		{"color", "error"},
		{"flag AND color", "error"},
		// system properties
		{"sys.Label = 'orders.created'", "true"},
		{"sys.label = 'orders.created'", "true"},
		{"sys.Subject LIKE 'ord%'", "true"},
		{"sys.SequenceNumber = 42", "true"},
		{"sys.DeliveryCount = 1", "true"},
		{"sys.CorrelationId = 'x'", "unknown"},
		{"sys.CorrelationId IS NULL", "true"},
		{"sys.To IN ('Store5', 'Store6')", "true"},
		{"sys.To NOT IN ('Store1','Store2')", "true"},
		// missing and null
		{"missing = 1", "unknown"},
		{"missing <> 1", "unknown"},
		{"missing + 1 = 1", "unknown"},
		{"-missing = 1", "unknown"},
		{"missing IS NULL", "true"},
		{"missing IS NOT NULL", "false"},
		{"nothing IS NULL", "true"},
		{"color IS NOT NULL", "true"},
		{"EXISTS(nothing)", "true"},
		{"EXISTS(missing)", "false"},
		{"EXISTS(sys.Label)", "true"},
		{"EXISTS(sys.ReplyTo)", "false"},
		{"NOT EXISTS(missing)", "true"},
		// IN
		{"color IN ('blue', 'red')", "true"},
		{"color IN ('blue')", "false"},
		{"color NOT IN ('blue')", "true"},
		{"color NOT IN ('red')", "false"},
		{"quantity IN (1, 15.0)", "true"},
		{"quantity IN ('15')", "false"},
		{"missing IN (1, 2)", "unknown"},
		{"missing NOT IN (1, 2)", "unknown"},
		{"color IN (missing, 'red')", "true"},
		{"color IN (quantity + 1, 'x' + 'y')", "false"},
		// LIKE
		{"color LIKE 'r%'", "true"},
		{"color NOT LIKE 'r%'", "false"},
		{"pct LIKE '100!%' ESCAPE '!'", "true"},
		{"color LIKE '100!%' ESCAPE '!'", "false"},
		{"missing LIKE 'r%'", "unknown"},
		{"missing NOT LIKE 'r%'", "unknown"},
		{"color LIKE missing", "unknown"},
		{"color LIKE 'r%' ESCAPE missing", "unknown"},
		{"quantity LIKE '1%'", "unknown"},
		{"color LIKE color", "true"},
		{"color LIKE quantity", "error"},
		{"color LIKE 'r%' ESCAPE color", "error"},
		{"pct LIKE str10 + '!' ESCAPE '!'", "error"},
		// functions
		{"property('color') = 'red'", "true"},
		{"p(name) = 'red'", "true"},
		{"property('user.color') = 'red'", "true"},
		{"property(sysname) = 'orders.created'", "true"},
		{"property('SYS.subject') = 'orders.created'", "true"},
		{"property('missing') IS NULL", "true"},
		{"property(missing) IS NULL", "true"},
		{"property('sys.Nope') = 1", "error"},
		{"property(quantity) = 1", "error"},
		{"newid() IS NOT NULL", "true"},
		// evaluation errors
		{"flag + 1 = 2", "error"},
		{"-color = 1", "error"},
		{"+color = 1", "error"},
		{"quantity / zero = 1", "error"},
		{"quantity % zero = 1", "error"},
		{"quantity / 0.0 > 0", "true"},
		{"data + 1 = 1", "error"},
		// three-valued AND/OR with short-circuit
		{"missing = 1 AND color = 'red'", "unknown"},
		{"missing = 1 OR color = 'red'", "true"},
		{"color = 'blue' AND flag + 1 = 2", "false"},
		{"color = 'red' OR flag + 1 = 2", "true"},
		{"color = 'red' AND flag + 1 = 2", "error"},
	}
	m := sampleMessage()
	for _, tt := range tests {
		f, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		if got := truthOf(f, m); got != tt.want {
			t.Errorf("%q = %s, want %s", tt.expr, got, tt.want)
		}
		matched, err := f.Match(m)
		if want := tt.want == "true"; matched != want {
			t.Errorf("Match(%q) = %v, want %v", tt.expr, matched, want)
		}
		if (err != nil) != (tt.want == "error") {
			t.Errorf("Match(%q) error = %v", tt.expr, err)
		}
		var ee *EvalError
		if err != nil && !errors.As(err, &ee) {
			t.Errorf("Match(%q) error %T, want *EvalError", tt.expr, err)
		}
	}
}

func TestEvalErrorPosition(t *testing.T) {
	f, err := Compile("a = 1 AND quantity / zero = 1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Match(newTestMessage(nil, map[string]any{"a": 1, "quantity": 1, "zero": 0}))
	var ee *EvalError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v, want *EvalError", err)
	}
	if ee.Pos != 19 {
		t.Errorf("error at %d, want 19 (the '/'): %v", ee.Pos, err)
	}
}

// TestSystemPropertyNames checks that every canonical name compiles and
// is what Message.System is asked for.
func TestSystemPropertyNames(t *testing.T) {
	for _, name := range SystemPropertyNames() {
		f, err := Compile("sys." + name + " = 1")
		if err != nil {
			t.Errorf("sys.%s: %v", name, err)
			continue
		}
		m := newTestMessage(map[string]any{name: 1}, nil)
		if ok, err := f.Match(m); !ok || err != nil {
			t.Errorf("sys.%s = 1 did not read System(%q): %v %v", name, name, ok, err)
		}
	}
}
