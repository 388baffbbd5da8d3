package memstore

import (
	"bytes"
	"fmt"
	"math/bits"
	"testing"
)

// checkTreap fails the test unless n is a binary search tree on key and a
// max-heap on prio, and returns its size and height.
func checkTreap(t *testing.T, n *node, lo, hi []byte) (size, height int) {
	t.Helper()
	if n == nil {
		return 0, 0
	}
	if lo != nil && bytes.Compare(n.key, lo) <= 0 || hi != nil && bytes.Compare(n.key, hi) >= 0 {
		t.Fatalf("key %q out of its subtree's range (%q, %q)", n.key, lo, hi)
	}
	for _, c := range []*node{n.left, n.right} {
		if c != nil && c.prio > n.prio {
			t.Fatalf("child %q has a higher priority than parent %q", c.key, n.key)
		}
	}
	ls, lh := checkTreap(t, n.left, lo, n.key)
	rs, rh := checkTreap(t, n.right, n.key, hi)
	return ls + rs + 1, max(lh, rh) + 1
}

func TestTreapStaysBalancedOnSortedInserts(t *testing.T) {
	// The broker appends keys in sequence order: the worst case for an
	// unbalanced tree.
	const n = 1 << 16
	var root *node
	for i := range n {
		root = insert(root, fmt.Appendf(nil, "%08d", i), nil)
	}
	size, height := checkTreap(t, root, nil, nil)
	if size != n {
		t.Fatalf("size %d, want %d", size, n)
	}
	// Expected height is about 3 log2 n; 6 log2 n is far beyond any
	// plausible draw.
	if limit := 6 * bits.Len(n); height > limit {
		t.Fatalf("height %d for %d keys, want <= %d", height, n, limit)
	}
}

func TestTreapUpdatesLeaveSnapshotsIntact(t *testing.T) {
	var root *node
	for i := range 100 {
		root = insert(root, fmt.Appendf(nil, "%03d", i), []byte("v1"))
	}
	snap := root
	root = insert(root, []byte("050"), []byte("v2"))
	root = remove(root, []byte("010"))
	root = removePrefix(root, []byte("09"))
	root = insert(root, []byte("100"), []byte("new"))

	if size, _ := checkTreap(t, snap, nil, nil); size != 100 {
		t.Fatalf("snapshot size %d after later updates, want 100", size)
	}
	if n := get(snap, []byte("050")); n == nil || string(n.value) != "v1" {
		t.Fatalf("snapshot sees a later overwrite")
	}
	if get(snap, []byte("010")) == nil || get(snap, []byte("095")) == nil {
		t.Fatalf("snapshot sees a later delete")
	}
	size, _ := checkTreap(t, root, nil, nil)
	if want := 100 - 1 - 10 + 1; size != want {
		t.Fatalf("new version size %d, want %d", size, want)
	}
}

func TestRemoveAbsentCopiesNothing(t *testing.T) {
	var root *node
	for i := range 50 {
		root = insert(root, fmt.Appendf(nil, "%03d", i), nil)
	}
	if got := remove(root, []byte("zzz")); got != root {
		t.Fatal("removing an absent key built a new tree")
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"a/", "a0", true},
		{"a\xff", "b", true},
		{"a\xff\xff", "b", true},
		{"\xff", "", false},
		{"\xff\xff", "", false},
		{"\x00", "\x01", true},
	}
	for _, tt := range tests {
		end, ok := prefixEnd([]byte(tt.prefix))
		if ok != tt.ok || string(end) != tt.end {
			t.Errorf("prefixEnd(%q) = %q, %t; want %q, %t", tt.prefix, end, ok, tt.end, tt.ok)
		}
	}
}
