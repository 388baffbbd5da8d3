package storagetest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var scanTests = []test{
	{"Empty", testScanEmpty},
	{"BytewiseOrder", testScanOrder},
	{"Prefix", testScanPrefix},
	{"Start", testScanStart},
	{"EarlyStop", testScanEarlyStop},
	{"ErrorPropagates", testScanError},
	{"Reentrant", testScanReentrant},
	{"Snapshot", testScanSnapshot},
}

func testScanEmpty(t *testing.T, s storage.Store) {
	if got := mustScan(t, s, nil, nil); len(got) != 0 {
		t.Fatalf("Scan of empty store = %v", got)
	}
}

func testScanOrder(t *testing.T, s storage.Store) {
	// Bytewise order: shorter before longer with the same start, 0x00
	// lowest, 0x80 and 0xff above ASCII.
	keys := []string{"", "\x00", "\x00\x00", "\x01", "A", "Z", "a", "a\x00",
		"a\x01", "aa", "ab", "b", "\x7f", "\x80", "\xfe\xff", "\xff", "\xff\x00", "\xff\xff"}
	shuffled := slices.Clone(keys)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, k := range shuffled {
		mustSet(t, s, kv{k, "v" + k})
	}
	var want []kv
	slices.Sort(keys)
	for _, k := range keys {
		want = append(want, kv{k, "v" + k})
	}
	checkContents(t, s, want...)
}

func testScanPrefix(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"q", "0"}, kv{"q/", "1"}, kv{"q/a", "2"}, kv{"q/b", "3"},
		kv{"q0", "4"}, kv{"r", "5"}, kv{"\xff\xff", "6"}, kv{"\xff\xff\x01", "7"})
	cases := []struct {
		prefix string
		want   []kv
	}{
		{"q/", []kv{{"q/", "1"}, {"q/a", "2"}, {"q/b", "3"}}},
		{"q", []kv{{"q", "0"}, {"q/", "1"}, {"q/a", "2"}, {"q/b", "3"}, {"q0", "4"}}},
		{"q/a", []kv{{"q/a", "2"}}},
		{"p", nil},
		{"q/c", nil},
		{"\xff\xff", []kv{{"\xff\xff", "6"}, {"\xff\xff\x01", "7"}}},
		{"\xff\xff\xff", nil},
	}
	for _, c := range cases {
		checkPairs(t, "Scan(prefix "+strconv.Quote(c.prefix)+")", mustScan(t, s, []byte(c.prefix), nil), c.want)
	}
}

func testScanStart(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "0"}, kv{"q/1", "1"}, kv{"q/3", "3"}, kv{"q/5", "5"}, kv{"r", "9"})
	cases := []struct {
		prefix, start string
		want          []kv
	}{
		// start is inclusive.
		{"q/", "q/3", []kv{{"q/3", "3"}, {"q/5", "5"}}},
		// start between keys.
		{"q/", "q/2", []kv{{"q/3", "3"}, {"q/5", "5"}}},
		{"q/", "q/5\x00", nil},
		// start before the prefix means from the prefix.
		{"q/", "", []kv{{"q/1", "1"}, {"q/3", "3"}, {"q/5", "5"}}},
		{"q/", "a", []kv{{"q/1", "1"}, {"q/3", "3"}, {"q/5", "5"}}},
		{"q/", "q", []kv{{"q/1", "1"}, {"q/3", "3"}, {"q/5", "5"}}},
		// start after every key of the prefix.
		{"q/", "r", nil},
		{"q/", "\xff", nil},
		// No prefix: start alone bounds the scan.
		{"", "q/4", []kv{{"q/5", "5"}, {"r", "9"}}},
		{"", "s", nil},
	}
	for _, c := range cases {
		got := mustScan(t, s, []byte(c.prefix), []byte(c.start))
		checkPairs(t, "Scan("+strconv.Quote(c.prefix)+", "+strconv.Quote(c.start)+")", got, c.want)
	}
}

func testScanEarlyStop(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k1", "1"}, kv{"k2", "2"}, kv{"k3", "3"}, kv{"k4", "4"})
	var seen []string
	err := s.Scan([]byte("k"), nil, func(k, _ []byte) (bool, error) {
		seen = append(seen, string(k))
		return len(seen) < 2, nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if want := []string{"k1", "k2"}; !slices.Equal(seen, want) {
		t.Fatalf("Scan stopping after 2 saw %q, want %q", seen, want)
	}
}

func testScanError(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k1", "1"}, kv{"k2", "2"}, kv{"k3", "3"})
	errStop := errors.New("stop here")
	calls := 0
	err := s.Scan(nil, nil, func(k, _ []byte) (bool, error) {
		calls++
		if string(k) == "k2" {
			// The boolean is ignored when an error is returned.
			return true, errStop
		}
		return true, nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Scan returned %v, want the callback's error", err)
	}
	if calls != 2 {
		t.Fatalf("callback called %d times, want 2 (no call after the error)", calls)
	}
}

func testScanReentrant(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"}, kv{"b", "2"}, kv{"c", "3"})
	// The core reads and writes from inside Scan callbacks; no store may
	// deadlock on that.
	err := s.Scan(nil, nil, func(k, v []byte) (bool, error) {
		if _, err := s.Get(k); err != nil {
			return false, err
		}
		b := &storage.Batch{Sync: true}
		b.Set(append([]byte("copy/"), k...), v)
		return true, s.Apply(b)
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	checkPairs(t, "copies", mustScan(t, s, []byte("copy/"), nil),
		[]kv{{"copy/a", "1"}, {"copy/b", "2"}, {"copy/c", "3"}})
}

func testScanSnapshot(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k1", "1"}, kv{"k2", "2"}, kv{"k3", "3"})
	// A Scan sees the store as it was when it began: writes made while it
	// runs, ahead of it or behind it, do not show.
	var got []kv
	err := s.Scan(nil, nil, func(k, v []byte) (bool, error) {
		got = append(got, kv{string(k), string(v)})
		if string(k) == "k1" {
			b := &storage.Batch{Sync: true}
			b.Set([]byte("k0"), []byte("new"))
			b.Set([]byte("k2"), []byte("changed"))
			b.Delete([]byte("k3"))
			b.Set([]byte("k4"), []byte("new"))
			return true, s.Apply(b)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	checkPairs(t, "Scan during writes", got, []kv{{"k1", "1"}, {"k2", "2"}, {"k3", "3"}})
	checkContents(t, s, kv{"k0", "new"}, kv{"k1", "1"}, kv{"k2", "changed"}, kv{"k4", "new"})
}
