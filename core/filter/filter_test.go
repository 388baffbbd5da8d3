package filter

import (
	"sync"
	"testing"
)

// TestConcurrentMatch checks (under -race) that one compiled filter and
// action can serve many goroutines, as the broker shares rules.
func TestConcurrentMatch(t *testing.T) {
	f, err := Compile(benchExpr + " AND property('color') LIKE '%e_'")
	if err != nil {
		t.Fatal(err)
	}
	a, err := CompileAction("SET n = quantity + 1; SET id = newid()")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			m := benchMessage()
			for range 200 {
				if ok, err := f.Match(m); !ok || err != nil {
					t.Errorf("Match = %v, %v", ok, err)
					return
				}
				if err := a.Apply(m); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
