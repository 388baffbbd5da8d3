package storagetest

import (
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

// DeleteOnce (storage.Batch.DeleteOnce) is a deletion every store must
// apply as a Delete would, as long as the caller keeps its invariant: the
// key was set at most once since its last deletion. These checks use it
// only that way, including the rewrite a caller makes to set a key again
// (a deletion of the key before the new Set, in the same batch). A store
// may make it cheaper (pebblestore: a SingleDelete that cancels with the
// Set it meets); what the caller sees must not differ.
var deleteOnceTests = []test{
	{"RemovesAKeySetOnce", testDeleteOnceRemoves},
	{"AbsentKeyIsNoop", testDeleteOnceAbsent},
	{"SameBatchAsItsSet", testDeleteOnceSameBatch},
	{"SetAgainAfter", testDeleteOnceSetAgain},
	{"AfterRewriteWithDelete", testDeleteOnceAfterRewriteDelete},
	{"AfterRewriteWithDeleteOnce", testDeleteOnceAfterRewriteDeleteOnce},
	{"AfterDeletePrefix", testDeleteOnceAfterDeletePrefix},
	{"ManyKeys", testDeleteOnceMany},
}

func deleteOnce(keys ...string) *storage.Batch {
	b := &storage.Batch{Sync: true}
	for _, k := range keys {
		b.DeleteOnce([]byte(k))
	}
	return b
}

func testDeleteOnceRemoves(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"}, kv{"b", "2"}, kv{"c", "3"})
	mustApply(t, s, deleteOnce("b"))
	checkMissing(t, s, "b")
	checkContents(t, s, kv{"a", "1"}, kv{"c", "3"})
}

func testDeleteOnceAbsent(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"a", "1"})
	mustApply(t, s, deleteOnce("never-set"))
	mustApply(t, s, deleteOnce("a"))
	mustApply(t, s, deleteOnce("a")) // already gone
	checkContents(t, s)
}

func testDeleteOnceSameBatch(t *testing.T, s storage.Store) {
	b := &storage.Batch{Sync: true}
	b.Set([]byte("k"), []byte("v"))
	b.Set([]byte("kept"), []byte("w"))
	b.DeleteOnce([]byte("k"))
	mustApply(t, s, b)
	checkContents(t, s, kv{"kept", "w"})
}

// A key deleted once may be set again (once), and deleted once again.
func testDeleteOnceSetAgain(t *testing.T, s storage.Store) {
	for i := range 3 {
		v := fmt.Sprint(i)
		mustSet(t, s, kv{"k", v})
		checkGet(t, s, "k", v)
		mustApply(t, s, deleteOnce("k"))
		checkMissing(t, s, "k")
	}
	mustSet(t, s, kv{"k", "last"})
	checkContents(t, s, kv{"k", "last"})
}

// A key rewritten as Delete then Set holds one value set once: DeleteOnce
// removes it and no older value comes back.
func testDeleteOnceAfterRewriteDelete(t *testing.T, s storage.Store) {
	deleteOnceAfterRewrite(t, s, (*storage.Batch).Delete)
}

// The same with the rewrite's deletion a DeleteOnce (the key held one
// value set once).
func testDeleteOnceAfterRewriteDeleteOnce(t *testing.T, s storage.Store) {
	deleteOnceAfterRewrite(t, s, (*storage.Batch).DeleteOnce)
}

// deleteOnceAfterRewrite rewrites a key twice, each time deleting it with
// del then setting it in one batch, and deletes it once at the end.
func deleteOnceAfterRewrite(t *testing.T, s storage.Store, del func(*storage.Batch, []byte)) {
	mustSet(t, s, kv{"k", "old"})
	for _, v := range []string{"new", "newer"} {
		b := &storage.Batch{Sync: true}
		del(b, []byte("k"))
		b.Set([]byte("k"), []byte(v))
		mustApply(t, s, b)
		checkGet(t, s, "k", v)
	}
	mustApply(t, s, deleteOnce("k"))
	checkContents(t, s)
}

// A DeletePrefix is a deletion: a key set once after it is deleted once.
func testDeleteOnceAfterDeletePrefix(t *testing.T, s storage.Store) {
	mustSet(t, s, kv{"p/a", "1"}, kv{"p/b", "2"})
	b := &storage.Batch{Sync: true}
	b.DeletePrefix([]byte("p/"))
	b.Set([]byte("p/a"), []byte("again"))
	mustApply(t, s, b)
	checkContents(t, s, kv{"p/a", "again"})
	mustApply(t, s, deleteOnce("p/a", "p/b"))
	checkContents(t, s)
}

// Enough keys, set and deleted once in separate batches, that a store
// with a memory buffer in front of its files sees several go by.
func testDeleteOnceMany(t *testing.T, s storage.Store) {
	const n = 3000
	val := make([]byte, 1024)
	key := func(i int) []byte { return fmt.Appendf(nil, "m/%06d", i) }
	for i := 0; i < n; i += 100 {
		b := &storage.Batch{Sync: true}
		for j := i; j < i+100; j++ {
			b.Set(key(j), val)
		}
		mustApply(t, s, b)
	}
	// Every key but each tenth, deleted once, in batches of 50.
	for i := 0; i < n; i += 50 {
		b := &storage.Batch{}
		for j := i; j < i+50; j++ {
			if j%10 != 0 {
				b.DeleteOnce(key(j))
			}
		}
		mustApply(t, s, b)
	}
	got := mustScan(t, s, []byte("m/"), nil)
	if len(got) != n/10 {
		t.Fatalf("after deleting all but each tenth of %d keys: %d left, want %d", n, len(got), n/10)
	}
	for i, p := range got {
		if want := string(key(10 * i)); p.k != want {
			t.Fatalf("key %d left is %q, want %q", i, p.k, want)
		}
	}
}
