package filter

import "testing"

const benchExpr = "color = 'red' AND quantity > 10 AND sys.Label LIKE 'ord%'"

func benchMessage() *testMessage {
	return newTestMessage(
		map[string]any{"Label": "orders.created", "MessageId": "m-1", "SequenceNumber": int64(7)},
		map[string]any{"color": "red", "quantity": 15, "region": "emea", "priority": 3.5})
}

// TestMatchDoesNotAllocate guards the hot path: routing a message through
// compiled filters must not allocate.
func TestMatchDoesNotAllocate(t *testing.T) {
	m := benchMessage()
	for _, expr := range []string{
		benchExpr,
		"NOT (color IN ('blue', 'green') OR quantity * 2 + 1 < 10.5) AND EXISTS(region)",
		"sys.MessageId IS NOT NULL AND missing IS NULL AND priority >= 3 AND color NOT LIKE '%x_'",
		"property('color') = 'red' AND -quantity < 0",
	} {
		f, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.Match(m); !ok || err != nil {
			t.Fatalf("%q did not match the sample: %v %v", expr, ok, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if ok, err := f.Match(m); !ok || err != nil {
				t.Fatal("no match")
			}
		})
		if allocs != 0 {
			t.Errorf("Match(%q) allocates %.1f times per run, want 0", expr, allocs)
		}
	}
	cf := &CorrelationFilter{Subject: "orders.created", Properties: map[string]any{"color": "red", "quantity": int64(15)}}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = cf.Match(m) }); allocs != 0 {
		t.Errorf("CorrelationFilter.Match allocates %.1f times per run, want 0", allocs)
	}
}

func BenchmarkSQLMatch(b *testing.B) {
	f, err := Compile(benchExpr)
	if err != nil {
		b.Fatal(err)
	}
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := f.Match(m); !ok || err != nil {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCorrelationMatch(b *testing.B) {
	f := &CorrelationFilter{Subject: "orders.created", Properties: map[string]any{"color": "red", "quantity": int64(15)}}
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := f.Match(m); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(benchExpr); err != nil {
			b.Fatal(err)
		}
	}
}
