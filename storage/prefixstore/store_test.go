package prefixstore_test

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
	"github.com/omnibusmq/omnibus/storage/prefixstore"
	"github.com/omnibusmq/omnibus/storage/storagetest"
)

// closingView closes the store under the view when the view is closed,
// so that the suite's Close checks see a closed store.
type closingView struct {
	*prefixstore.Store
	under storage.Store
}

func (c closingView) Close() error { return c.under.Close() }

// TestSuite runs the storage suite through a view whose underlying store
// also holds keys of a neighbouring range and of an unprefixed one, which
// the suite's scans and prefix deletions must never see or touch.
func TestSuite(t *testing.T) {
	storagetest.RunSuite(t, func(t *testing.T) storage.Store {
		under := memstore.New()
		mustSet(t, under, "a", "a0/x", "ab/1", "b")
		return closingView{prefixstore.New(under, []byte("a/")), under}
	})
}

// TestIsolation checks what the suite cannot see: that writes, scans and
// prefix deletions of a view leave the keys outside its range alone.
func TestIsolation(t *testing.T) {
	under := memstore.New()
	t.Cleanup(func() { under.Close() })
	mustSet(t, under, "Eq", "sales", "sales-x/Eq", "salez/Eq")
	v := prefixstore.New(under, []byte("sales/"))
	mustSet(t, v, "Eq", "Q1", "Q2")

	var got []string
	if err := v.Scan(nil, nil, func(k, _ []byte) (bool, error) {
		got = append(got, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Eq", "Q1", "Q2"}; !equal(got, want) {
		t.Errorf("view scan = %q, want %q", got, want)
	}
	if _, err := v.Get([]byte("sales-x/Eq")); err != storage.ErrNotFound {
		t.Errorf("Get of a neighbour's key through the view: %v, want ErrNotFound", err)
	}

	var b storage.Batch
	b.DeletePrefix(nil)
	b.Sync = true
	if err := v.Apply(&b); err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := under.Scan(nil, nil, func(k, _ []byte) (bool, error) {
		got = append(got, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Eq", "sales", "sales-x/Eq", "salez/Eq"}; !equal(got, want) {
		t.Errorf("after deleting the view's whole range the store holds %q, want %q", got, want)
	}
}

func mustSet(t testing.TB, s storage.Store, keys ...string) {
	t.Helper()
	var b storage.Batch
	for _, k := range keys {
		b.Set([]byte(k), []byte("v:"+k))
	}
	if err := s.Apply(&b); err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal([]byte(a[i]), []byte(b[i])) {
			return false
		}
	}
	return true
}
