package core_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestDeps enforces STYLE §7.3: the core and its subpackages import only
// the standard library, zap, other core packages and the storage seam —
// never a protocol front, a router or Pebble.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/omnibusmq/omnibus/"
	allowed := []string{mod + "core", mod + "storage", "go.uber.org/zap", "go.uber.org/multierr"}
	forbidden := []string{"github.com/cockroachdb/pebble", mod + "amqpserver", mod + "httpgw", "github.com/gorilla/mux", mod + "storage/pebblestore"}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Standard   bool
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		for _, f := range forbidden {
			if strings.HasPrefix(p.ImportPath, f) {
				t.Errorf("core depends on forbidden package %s", p.ImportPath)
			}
		}
		if p.Standard || hasAnyPrefix(p.ImportPath, allowed) {
			continue
		}
		t.Errorf("core depends on %s, which is not stdlib, zap, core or storage", p.ImportPath)
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") || strings.HasPrefix(s, p+".") {
			return true
		}
	}
	return false
}
