package storagetest

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var basicTests = []test{
	{"SetGet", testSetGet},
	{"GetMissing", testGetMissing},
	{"Overwrite", testOverwrite},
	{"Delete", testDelete},
	{"DeleteAbsent", testDeleteAbsent},
	{"EmptyValue", testEmptyValue},
	{"BinaryKeys", testBinaryKeys},
	{"ApplyCopiesKeysAndValues", testApplyCopies},
	{"GetReturnsCopy", testGetReturnsCopy},
	{"NoSync", testNoSync},
}

func testSetGet(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"}, kv{"b", "2"})
	checkGet(t, s, "a", "1")
	checkGet(t, s, "b", "2")
}

func testGetMissing(t *testing.T, s storage.Store) {
	checkMissing(t, s, "nothing")
	mustSet(t, s, kv{"ab", "1"})
	// Neighbours of a stored key are not it.
	checkMissing(t, s, "a")
	checkMissing(t, s, "abc")
	checkMissing(t, s, "")
}

func testOverwrite(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k", "old"})
	mustSet(t, s, kv{"k", "new"})
	checkGet(t, s, "k", "new")
	checkContents(t, s, kv{"k", "new"})
}

func testDelete(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"}, kv{"b", "2"})
	b := &storage.Batch{Sync: true}
	b.Delete([]byte("a"))
	mustApply(t, s, b)
	checkMissing(t, s, "a")
	checkGet(t, s, "b", "2")
	checkContents(t, s, kv{"b", "2"})
}

func testDeleteAbsent(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"})
	b := &storage.Batch{Sync: true}
	b.Delete([]byte("zzz"))
	b.Delete([]byte("zzz"))
	mustApply(t, s, b)
	checkContents(t, s, kv{"a", "1"})
}

func testEmptyValue(t *testing.T, s storage.Store) {
	b := &storage.Batch{Sync: true}
	b.Set([]byte("nil"), nil)
	b.Set([]byte("empty"), []byte{})
	mustApply(t, s, b)
	for _, k := range []string{"nil", "empty"} {
		got, err := s.Get([]byte(k))
		if err != nil || len(got) != 0 {
			t.Errorf("Get(%q) = %q, %v; want empty value, nil error", k, got, err)
		}
	}
	checkContents(t, s, kv{"empty", ""}, kv{"nil", ""})
}

func testBinaryKeys(t *testing.T, s storage.Store) {
	keys := []string{"", "\x00", "\x00\x00", "\xff", "\xff\xff", "a\x00b", "\x80"}
	b := &storage.Batch{Sync: true}
	for i, k := range keys {
		b.Set([]byte(k), []byte{byte(i), 0, 0xff})
	}
	mustApply(t, s, b)
	for i, k := range keys {
		checkGet(t, s, k, string([]byte{byte(i), 0, 0xff}))
	}
}

func testApplyCopies(t *testing.T, s storage.Store) {
	key := []byte("key")
	val := []byte("value")
	b := &storage.Batch{Sync: true}
	b.Set(key, val)
	mustApply(t, s, b)
	// The caller owns its buffers again once Apply returns.
	copy(key, "KEY")
	copy(val, "VALUE")
	b.Reset()
	checkGet(t, s, "key", "value")
	checkMissing(t, s, "KEY")
	checkContents(t, s, kv{"key", "value"})
}

func testGetReturnsCopy(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"k", "value"})
	got, err := s.Get([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = 'X'
	}
	checkGet(t, s, "k", "value")

	// Nor may a Scan callback's slices alias what Get returns.
	v1, _ := s.Get([]byte("k"))
	if err := s.Scan(nil, nil, func(k, v []byte) (bool, error) {
		if len(v) > 0 && &v[0] == &v1[0] {
			t.Errorf("Scan value aliases the slice Get returned")
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v1, []byte("value")) {
		t.Errorf("Get value changed by Scan: %q", v1)
	}
}

func testNoSync(t *testing.T, s storage.Store) {
	// A batch without Sync is applied and visible at once; only its
	// durability differs.
	b := &storage.Batch{}
	b.Set([]byte("k"), []byte("v"))
	mustApply(t, s, b)
	checkGet(t, s, "k", "v")
}
