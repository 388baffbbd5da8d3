package core_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package of the module has a package
// doc comment (STYLE §7.6), like tailscale's pkgdoc_test. It looks at the
// files git tracks, so work in progress in a shared checkout does not fail
// it before it is committed.
func TestPackageDocs(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "--full-name", "*.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	root, err := exec.Command("git", "-C", "..", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("git rev-parse: %v", err)
	}
	top := strings.TrimSpace(string(root))
	documented := map[string]bool{}
	seen := map[string]bool{}
	for _, rel := range strings.Fields(string(out)) {
		if strings.HasSuffix(rel, "_test.go") || strings.Contains(rel, "/testdata/") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(top, rel), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			continue // deleted or being edited; go vet reports real problems
		}
		dir := filepath.Dir(rel)
		seen[dir] = true
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			documented[dir] = true
		}
	}
	if len(seen) == 0 {
		t.Fatal("no Go files found")
	}
	for dir := range seen {
		if !documented[dir] {
			t.Errorf("package %s has no package doc comment", dir)
		}
	}
}
