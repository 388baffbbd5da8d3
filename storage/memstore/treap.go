package memstore

import (
	"bytes"
	"math/rand/v2"
)

// node is one entry of a persistent treap: a binary search tree on key that
// is also a max-heap on prio. Random priorities keep the expected depth at
// O(log n) whatever the insertion order.
//
// Nodes are immutable once they are reachable from a published root: every
// update copies the path from the root to the changed node ("path copying"),
// so a reader holding an old root keeps a consistent snapshot for as long as
// it likes, without locks.
type node struct {
	key, value  []byte
	prio        uint64
	left, right *node
	// overwritten: the key was set again while it held a value, so a
	// DeleteOnce of it breaks storage.Batch.DeleteOnce's invariant.
	overwritten bool
}

// clone returns a shallow copy of n that the caller may modify.
func (n *node) clone() *node {
	c := *n
	return &c
}

// get returns the node holding key, or nil.
func get(n *node, key []byte) *node {
	for n != nil {
		switch c := bytes.Compare(key, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n
		}
	}
	return nil
}

// insert returns a root in which key maps to value. key and value are owned
// by the tree from now on.
func insert(n *node, key, value []byte) *node {
	if n == nil {
		return &node{key: key, value: value, prio: rand.Uint64()}
	}
	c := n.clone()
	switch cmp := bytes.Compare(key, n.key); {
	case cmp < 0:
		c.left = insert(n.left, key, value)
		if c.left.prio > c.prio {
			return rotateRight(c)
		}
	case cmp > 0:
		c.right = insert(n.right, key, value)
		if c.right.prio > c.prio {
			return rotateLeft(c)
		}
	default:
		c.value = value
		c.overwritten = true
	}
	return c
}

// rotateRight lifts n.left above n. Both n and n.left must be fresh copies.
func rotateRight(n *node) *node {
	l := n.left
	n.left = l.right
	l.right = n
	return l
}

// rotateLeft lifts n.right above n. Both n and n.right must be fresh copies.
func rotateLeft(n *node) *node {
	r := n.right
	n.right = r.left
	r.left = n
	return r
}

// remove returns a root without key. If key is absent it returns n itself,
// copying nothing.
func remove(n *node, key []byte) *node {
	if n == nil {
		return nil
	}
	switch cmp := bytes.Compare(key, n.key); {
	case cmp < 0:
		l := remove(n.left, key)
		if l == n.left {
			return n
		}
		c := n.clone()
		c.left = l
		return c
	case cmp > 0:
		r := remove(n.right, key)
		if r == n.right {
			return n
		}
		c := n.clone()
		c.right = r
		return c
	default:
		return merge(n.left, n.right)
	}
}

// merge joins two treaps where every key of a is below every key of b.
func merge(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		c := a.clone()
		c.right = merge(a.right, b)
		return c
	default:
		c := b.clone()
		c.left = merge(a, b.left)
		return c
	}
}

// split divides n into the keys below key and the keys at or above it.
func split(n *node, key []byte) (below, atOrAbove *node) {
	if n == nil {
		return nil, nil
	}
	if bytes.Compare(n.key, key) < 0 {
		l, r := split(n.right, key)
		if l == n.right {
			return n, r
		}
		c := n.clone()
		c.right = l
		return c, r
	}
	l, r := split(n.left, key)
	if r == n.left {
		return l, n
	}
	c := n.clone()
	c.left = r
	return l, c
}

// removePrefix returns a root without any key that starts with prefix. It
// costs O(log n) whatever the number of keys removed.
func removePrefix(n *node, prefix []byte) *node {
	below, rest := split(n, prefix)
	end, ok := prefixEnd(prefix)
	if !ok {
		// No key above prefix lacks it: everything from prefix on goes.
		return below
	}
	_, above := split(rest, end)
	return merge(below, above)
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix, and false if there is none (prefix is empty or all 0xff).
func prefixEnd(prefix []byte) ([]byte, bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end, true
		}
	}
	return nil, false
}
