// Package storagetest holds the conformance suite every [storage.Store]
// implementation must pass, so that memstore and pebblestore behave the same
// way and the core can be tested against either.
//
// Each implementation's tests call [RunSuite] with a function that opens a
// fresh, empty store:
//
//	func TestSuite(t *testing.T) {
//		storagetest.RunSuite(t, func(t *testing.T) storage.Store { return memstore.New() })
//	}
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// RunSuite runs every check of the suite as a subtest of t. open must return
// a new, empty store each time it is called; it may use t for t.TempDir and
// t.Fatal. RunSuite closes every store it opens (and tolerates a store that
// a check already closed), so open need not register a Close itself.
func RunSuite(t *testing.T, open func(t *testing.T) storage.Store) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Basic", basicTests},
		{"DeletePrefix", deletePrefixTests},
		{"Scan", scanTests},
		{"Batch", batchTests},
		{"DeleteOnce", deleteOnceTests},
		{"Close", closeTests},
		{"Concurrency", concurrencyTests},
		{"Volume", volumeTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, newTestStore(t, open))
				})
			}
		})
	}
}

// test is one check of the suite, run against a fresh store.
type test struct {
	name string
	run  func(t *testing.T, s storage.Store)
}

// newTestStore opens a store and closes it when t ends.
func newTestStore(t *testing.T, open func(t *testing.T) storage.Store) storage.Store {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("open returned a nil store")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// kv is one key/value pair, as strings so that test failures print well.
type kv struct{ k, v string }

// mustApply applies b and fails the test on error.
func mustApply(t testing.TB, s storage.Store, b *storage.Batch) {
	t.Helper()
	if err := s.Apply(b); err != nil {
		t.Fatalf("Apply(%d ops, sync=%t): %v", b.Len(), b.Sync, err)
	}
}

// mustSet stores each pair in one synced batch.
func mustSet(t testing.TB, s storage.Store, pairs ...kv) {
	t.Helper()
	b := &storage.Batch{Sync: true}
	for _, p := range pairs {
		b.Set([]byte(p.k), []byte(p.v))
	}
	mustApply(t, s, b)
}

// checkGet fails the test unless key holds want.
func checkGet(t testing.TB, s storage.Store, key, want string) {
	t.Helper()
	got, err := s.Get([]byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v, want %q", key, err, want)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

// checkMissing fails the test unless Get(key) reports ErrNotFound.
func checkMissing(t testing.TB, s storage.Store, key string) {
	t.Helper()
	got, err := s.Get([]byte(key))
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

// mustScan returns every pair Scan(prefix, start) yields, copying the
// callback's slices.
func mustScan(t testing.TB, s storage.Store, prefix, start []byte) []kv {
	t.Helper()
	var got []kv
	err := s.Scan(prefix, start, func(k, v []byte) (bool, error) {
		got = append(got, kv{string(k), string(v)})
		return true, nil
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q): %v", prefix, start, err)
	}
	return got
}

// checkContents fails the test unless the whole store holds exactly want, in
// this order.
func checkContents(t testing.TB, s storage.Store, want ...kv) {
	t.Helper()
	checkPairs(t, "store", mustScan(t, s, nil, nil), want)
}

// checkPairs compares two ordered lists of pairs.
func checkPairs(t testing.TB, what string, got, want []kv) {
	t.Helper()
	if len(got) == len(want) {
		same := true
		for i := range got {
			if got[i] != want[i] {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	t.Fatalf("%s:\n got  %s\n want %s", what, formatPairs(got), formatPairs(want))
}

func formatPairs(ps []kv) string {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			buf.WriteByte(' ')
		}
		fmt.Fprintf(&buf, "%q=%q", p.k, p.v)
	}
	buf.WriteByte(']')
	return buf.String()
}
