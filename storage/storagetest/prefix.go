package storagetest

import (
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var deletePrefixTests = []test{
	{"Basic", testDeletePrefix},
	{"NoMatch", testDeletePrefixNoMatch},
	{"WholeKeyIsPrefix", testDeletePrefixWholeKey},
	{"CarryByte", testDeletePrefixCarry},
	{"AllFF", testDeletePrefixAllFF},
	{"Empty", testDeletePrefixEmpty},
	{"OrderInBatch", testDeletePrefixOrderInBatch},
}

// deletePrefix applies a synced batch holding one DeletePrefix.
func deletePrefix(t testing.TB, s storage.Store, prefix string) {
	t.Helper()
	b := &storage.Batch{Sync: true}
	b.DeletePrefix([]byte(prefix))
	mustApply(t, s, b)
}

func testDeletePrefix(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "0"}, kv{"a/", "1"}, kv{"a/1", "2"}, kv{"a/2", "3"},
		kv{"a/2/x", "4"}, kv{"a0", "5"}, kv{"ab", "6"}, kv{"b", "7"})
	deletePrefix(t, s, "a/")
	checkContents(t, s, kv{"a", "0"}, kv{"a0", "5"}, kv{"ab", "6"}, kv{"b", "7"})
}

func testDeletePrefixNoMatch(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"}, kv{"c", "2"})
	deletePrefix(t, s, "b")
	checkContents(t, s, kv{"a", "1"}, kv{"c", "2"})
}

func testDeletePrefixWholeKey(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"abc", "1"}, kv{"abd", "2"})
	deletePrefix(t, s, "abc")
	checkContents(t, s, kv{"abd", "2"})
}

func testDeletePrefixCarry(t *testing.T, s storage.Store) {
	// The end of the range of "a\xff" is "b": the trailing 0xff carries.
	mustSet(t, s, kv{"a\xfe\xff", "0"}, kv{"a\xff", "1"}, kv{"a\xff\x00", "2"},
		kv{"a\xff\xff\xff", "3"}, kv{"b", "4"}, kv{"b\x00", "5"})
	deletePrefix(t, s, "a\xff")
	checkContents(t, s, kv{"a\xfe\xff", "0"}, kv{"b", "4"}, kv{"b\x00", "5"})
}

func testDeletePrefixAllFF(t *testing.T, s storage.Store) {
	// No key bounds the keys starting with "\xff\xff" from above.
	mustSet(t, s, kv{"\xff", "0"}, kv{"\xff\xfe\xff", "1"}, kv{"\xff\xff", "2"},
		kv{"\xff\xff\x00", "3"}, kv{"\xff\xff\xff\xff\xff", "4"})
	deletePrefix(t, s, "\xff\xff")
	checkContents(t, s, kv{"\xff", "0"}, kv{"\xff\xfe\xff", "1"})
}

func testDeletePrefixEmpty(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"", "0"}, kv{"\x00", "1"}, kv{"m", "2"}, kv{"\xff\xff", "3"})
	deletePrefix(t, s, "")
	checkContents(t, s)
	// The store is still usable afterwards.
	mustSet(t, s, kv{"m", "again"})
	checkContents(t, s, kv{"m", "again"})
}

func testDeletePrefixOrderInBatch(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"p/old", "0"}, kv{"\xff\xffold", "0"})
	// Operations apply in order: a set before the DeletePrefix is
	// removed by it, a set after it survives. Both kinds of prefix, bounded
	// and unbounded, must honour this.
	b := &storage.Batch{Sync: true}
	for _, p := range []string{"p/", "\xff\xff"} {
		b.Set([]byte(p+"before"), []byte("1"))
		b.DeletePrefix([]byte(p))
		b.Set([]byte(p+"after"), []byte("2"))
	}
	b.Set([]byte("q"), []byte("3"))
	mustApply(t, s, b)
	checkContents(t, s, kv{"p/after", "2"}, kv{"q", "3"}, kv{"\xff\xffafter", "2"})
}
