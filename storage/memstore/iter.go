package memstore

import "bytes"

// iter walks a treap snapshot in ascending key order. The zero value is
// exhausted; use seek to position it.
type iter struct {
	// stack holds the nodes still to visit, the next one on top; each
	// node's right subtree is pushed once the node is popped.
	stack []*node
}

// seek positions it at the first key >= lo in the tree rooted at n. It costs
// O(log n).
func (it *iter) seek(n *node, lo []byte) {
	it.stack = it.stack[:0]
	for n != nil {
		if bytes.Compare(n.key, lo) >= 0 {
			it.stack = append(it.stack, n)
			n = n.left
		} else {
			n = n.right
		}
	}
}

// next returns the next node in key order, or nil when the walk is done.
func (it *iter) next() *node {
	if len(it.stack) == 0 {
		return nil
	}
	n := it.stack[len(it.stack)-1]
	it.stack = it.stack[:len(it.stack)-1]
	for c := n.right; c != nil; c = c.left {
		it.stack = append(it.stack, c)
	}
	return n
}
