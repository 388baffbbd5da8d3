package core

// recHeap is a min-heap of message records ordered by sequence number:
// the deliverable messages of a queue (or of one session). Abandoned and
// lock-expired messages go back in by their sequence number, so they are
// delivered again at (or near) the head, as Service Bus does.
type recHeap []*msgRec

func (h recHeap) less(i, j int) bool { return h[i].seq < h[j].seq }

func (h recHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (h *recHeap) push(r *msgRec) {
	r.idx = len(*h)
	*h = append(*h, r)
	h.up(r.idx)
}

// pop removes and returns the record with the lowest sequence number.
func (h *recHeap) pop() *msgRec {
	old := *h
	n := len(old) - 1
	old.swap(0, n)
	r := old[n]
	old[n] = nil
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
	r.idx = -1
	return r
}

// remove removes the record at index i.
func (h *recHeap) remove(i int) *msgRec {
	old := *h
	n := len(old) - 1
	r := old[i]
	if i != n {
		old.swap(i, n)
	}
	old[n] = nil
	*h = old[:n]
	if i != n {
		h.up(i)
		h.down(i)
	}
	r.idx = -1
	return r
}

func (h recHeap) peek() *msgRec {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h recHeap) up(j int) {
	for {
		i := (j - 1) / 2
		if i == j || !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h recHeap) down(i int) {
	n := len(h)
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
}

// timeItem is an entry of a timeHeap: something due at a time.
type timeItem struct {
	at   int64 // unix nanos
	rec  *msgRec
	tok  LockToken // for lock expiry entries: the lock the entry was made for
	sess *session  // for session lock expiry entries
}

func (it timeItem) dueAt() int64 { return it.at }

// timeHeap orders timeItems by due time. Entries are removed lazily: the
// consumer checks on pop whether an entry still applies.
type timeHeap []timeItem

func (h *timeHeap) push(it timeItem) { pushDue((*[]timeItem)(h), it) }

func (h *timeHeap) pop() timeItem { return popDue((*[]timeItem)(h)) }

// next returns the earliest due time, or 0 when empty.
func (h timeHeap) next() int64 {
	if len(h) == 0 {
		return 0
	}
	return h[0].at
}

// due is anything kept in a due-time heap.
type due interface{ dueAt() int64 }

// pushDue adds it to the min-heap h ordered by due time.
func pushDue[T due](h *[]T, it T) {
	s := append(*h, it)
	for j := len(s) - 1; j > 0; {
		i := (j - 1) / 2
		if s[i].dueAt() <= s[j].dueAt() {
			break
		}
		s[i], s[j] = s[j], s[i]
		j = i
	}
	*h = s
}

// popDue removes and returns the earliest item of the min-heap h.
func popDue[T due](h *[]T) T {
	s := *h
	it := s[0]
	n := len(s) - 1
	s[0] = s[n]
	var zero T
	s[n] = zero
	s = s[:n]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && s[r].dueAt() < s[j].dueAt() {
			j = r
		}
		if s[i].dueAt() <= s[j].dueAt() {
			break
		}
		s[i], s[j] = s[j], s[i]
		i = j
	}
	*h = s
	return it
}
