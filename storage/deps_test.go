package storage_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// listedPackage is the part of `go list -json` output these tests read.
type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	Imports    []string
}

// goList runs `go list -e -json args...` in dir and decodes its stream of
// JSON objects. It skips the test if no go command is on PATH.
func goList(t *testing.T, dir string, args ...string) []listedPackage {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	cmd := exec.Command(gocmd, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestStorageImportsOnlyStdlib keeps the seam free of dependencies: the
// core imports it, and it must stay a plain description of the contract.
func TestStorageImportsOnlyStdlib(t *testing.T) {
	const self = "github.com/omnibusmq/omnibus/storage"
	for _, p := range goList(t, ".", "-deps", ".") {
		if !p.Standard && p.ImportPath != self {
			t.Errorf("package storage depends on %s; it may import only the standard library", p.ImportPath)
		}
	}
}

// TestOnlyPebblestoreImportsPebble keeps Pebble behind the seam. It reads
// the non-test imports of every package of the module; tests may import
// Pebble (for vfs.NewMem), production code outside pebblestore may not.
// It uses -e so that another package failing to compile at the moment does
// not hide the check, and skips packages whose directory is gone.
func TestOnlyPebblestoreImportsPebble(t *testing.T) {
	const (
		allowed = "github.com/omnibusmq/omnibus/storage/pebblestore"
		pebble  = "github.com/cockroachdb/pebble"
	)
	checked, sawAllowed := 0, false
	for _, p := range goList(t, "..", "./...") {
		if p.ImportPath == allowed {
			for _, imp := range p.Imports {
				sawAllowed = sawAllowed || strings.HasPrefix(imp, pebble)
			}
			continue
		}
		if p.Dir == "" {
			continue
		}
		if _, err := os.Stat(p.Dir); err != nil {
			continue
		}
		checked++
		for _, imp := range p.Imports {
			if imp == pebble || strings.HasPrefix(imp, pebble+"/") {
				t.Errorf("%s imports %s; only %s may import Pebble", p.ImportPath, imp, allowed)
			}
		}
	}
	if checked == 0 || !sawAllowed {
		// Guard the guard: if pebblestore's Pebble import is invisible,
		// so would be anyone else's.
		t.Fatalf("go list output looks wrong: %d packages checked, pebblestore seen importing Pebble: %t", checked, sawAllowed)
	}
}
