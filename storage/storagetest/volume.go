package storagetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
)

var volumeTests = []test{
	{"LargeValues", testLargeValues},
	{"LargeBatch", testLargeBatch},
	{"ManyKeys", testManyKeys},
}

// randomBytes returns n pseudo-random bytes determined by seed.
func randomBytes(seed uint64, n int) []byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b) // never fails
	return b
}

func testLargeValues(t *testing.T, s storage.Store) {
	sizes := []int{1 << 20, 1<<20 + 1, 4 << 20}
	for i, n := range sizes {
		b := &storage.Batch{Sync: true}
		b.Set(fmt.Appendf(nil, "big/%d", i), randomBytes(uint64(i), n))
		mustApply(t, s, b)
	}
	for i, n := range sizes {
		got, err := s.Get(fmt.Appendf(nil, "big/%d", i))
		if err != nil {
			t.Fatalf("Get big/%d: %v", i, err)
		}
		if !bytes.Equal(got, randomBytes(uint64(i), n)) {
			t.Fatalf("big/%d: got %d bytes, not the %d written", i, len(got), n)
		}
	}
	i := 0
	err := s.Scan([]byte("big/"), nil, func(_, v []byte) (bool, error) {
		if !bytes.Equal(v, randomBytes(uint64(i), sizes[i])) {
			return false, fmt.Errorf("Scan value %d: %d bytes, not the %d written", i, len(v), sizes[i])
		}
		i++
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != len(sizes) {
		t.Fatalf("Scan saw %d large values, want %d", i, len(sizes))
	}
}

func testLargeBatch(t *testing.T, s storage.Store) {
	// 12 MiB in one batch: more than half a typical memtable, so engines that
	// treat large batches specially take that path.
	const n = 12
	b := &storage.Batch{Sync: true}
	for i := range n {
		b.Set(fmt.Appendf(nil, "lb/%02d", i), randomBytes(uint64(100+i), 1<<20))
	}
	mustApply(t, s, b)
	for i := range n {
		got, err := s.Get(fmt.Appendf(nil, "lb/%02d", i))
		if err != nil || !bytes.Equal(got, randomBytes(uint64(100+i), 1<<20)) {
			t.Fatalf("lb/%02d: %d bytes, %v; want the 1 MiB written", i, len(got), err)
		}
	}
	deletePrefix(t, s, "lb/")
	checkContents(t, s)
}

func testManyKeys(t *testing.T, s storage.Store) {
	const n, perBatch = 100_000, 1000
	key := func(i int) []byte { return fmt.Appendf(nil, "k/%08d", i) }
	// Fill in shuffled batches so that the store sees keys out of order.
	order := rand.Perm(n / perBatch)
	for _, bi := range order {
		b := &storage.Batch{}
		for i := bi * perBatch; i < (bi+1)*perBatch; i++ {
			b.Set(key(i), key(i)[2:])
		}
		mustApply(t, s, b)
	}

	want := 0
	err := s.Scan([]byte("k/"), nil, func(k, v []byte) (bool, error) {
		if !bytes.Equal(k, key(want)) || !bytes.Equal(v, k[2:]) {
			return false, fmt.Errorf("key %d of scan is %q=%q, want %q", want, k, v, key(want))
		}
		want++
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want != n {
		t.Fatalf("Scan saw %d keys, want %d", want, n)
	}

	// Starting deep inside is cheap and exact.
	got := mustScanN(t, s, []byte("k/"), key(77_777), 3)
	checkPairs(t, "Scan from k/00077777", got, []kv{
		{"k/00077777", "00077777"}, {"k/00077778", "00077778"}, {"k/00077779", "00077779"}})
	for range 1000 {
		i := rand.IntN(n)
		checkGet(t, s, string(key(i)), string(key(i)[2:]))
	}

	// Remove a tenth of the keys by prefix and check the seams.
	deletePrefix(t, s, "k/0001")
	checkGet(t, s, "k/00009999", "00009999")
	checkMissing(t, s, "k/00010000")
	checkMissing(t, s, "k/00019999")
	checkGet(t, s, "k/00020000", "00020000")
	count := 0
	if err := s.Scan([]byte("k/"), nil, func(_, _ []byte) (bool, error) { count++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	if count != n-10_000 {
		t.Fatalf("%d keys after DeletePrefix, want %d", count, n-10_000)
	}
}

// mustScanN returns at most max pairs of Scan(prefix, start).
func mustScanN(t testing.TB, s storage.Store, prefix, start []byte, max int) []kv {
	t.Helper()
	var got []kv
	err := s.Scan(prefix, start, func(k, v []byte) (bool, error) {
		got = append(got, kv{string(k), string(v)})
		return len(got) < max, nil
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q): %v", prefix, start, err)
	}
	return got
}
