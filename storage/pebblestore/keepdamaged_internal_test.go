package pebblestore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"
)

// Copies of damaged logs kept within the same second (a repaired start
// that keeps a log, then finds another damaged) each keep their own file:
// the name has the second in it, and a second copy used to overwrite the
// first.
func TestDamagedCopiesKeptInOneSecondAreAllKept(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Store{dir: "db", fs: mem, log: zaptest.NewLogger(t)}
	kept := map[string]string{}
	for _, c := range []struct{ log, data string }{
		{"db/000005.log", "first"}, {"db/000005.log", "second, longer"}, {"db/000005.log", "third"},
	} {
		if err := writeSynced(mem, c.log, []byte(c.data)); err != nil {
			t.Fatal(err)
		}
		dst := s.keepDamaged(c.log)
		if dst == "" {
			t.Fatalf("no copy kept of %s", c.log)
		}
		if prev, ok := kept[dst]; ok {
			t.Fatalf("the copy of %q went to %s, which held the copy of %q", c.data, dst, prev)
		}
		kept[dst] = c.data
	}
	for dst, want := range kept {
		got, err := readFile(mem, dst)
		if err != nil || string(got) != want {
			t.Errorf("%s holds %q, %v; want %q", dst, got, err, want)
		}
	}
}
