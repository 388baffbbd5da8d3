package core

// recHeap is a min-heap of message records ordered by sequence number:
// the deliverable messages of a queue (or of one session). Abandoned and
// lock-expired messages go back in by their sequence number, so they are
// delivered again at (or near) the head, as Service Bus does.
type recHeap []*msgRec

func (h recHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = int32(i)
	h[j].idx = int32(j)
}

func (h *recHeap) push(r *msgRec) {
	r.idx = int32(len(*h))
	*h = append(*h, r)
	h.up(len(*h) - 1)
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

// up moves the record at j towards the root to its place. Like down, it
// moves a hole rather than swapping: each level reads one other record
// and writes it once, and the moving record is written at the end.
func (h recHeap) up(j int) {
	r := h[j]
	for j > 0 {
		i := (j - 1) / 2
		p := h[i]
		if r.seq >= p.seq {
			break
		}
		h[j], p.idx = p, int32(j)
		j = i
	}
	h[j], r.idx = r, int32(j)
}

// down moves the record at i towards the leaves to its place. A pop
// (every peek-lock delivery) sifts a record down the whole heap: with a
// hole, each level compares the two children and the moving record's
// sequence number (kept in a local), and writes one record and its
// position, where a swap read both records again and wrote both.
func (h recHeap) down(i int) {
	n := len(h)
	r := h[i]
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		c := h[j]
		if k := j + 1; k < n && h[k].seq < c.seq {
			j, c = k, h[k]
		}
		if c.seq >= r.seq {
			break
		}
		h[i], c.idx = c, int32(i)
		i = j
	}
	h[i], r.idx = r, int32(i)
}

// timeItem is an entry of a queue's timeHeap: the expiry of a message
// lock or the activation of a scheduled message (rec), or the expiry of a
// session lock (sess).
type timeItem struct {
	at   int64 // unix nanos
	rec  *msgRec
	sess *session
}

// timeHeap orders a queue's due times. Every entry knows its position
// (msgRec.tpos, session.tpos), so it leaves the heap the moment its lock
// ends or its schedule is cancelled, and a renewal moves it in place: the
// heap holds one entry per lock and scheduled message that exists now.
type timeHeap []timeItem

// setPos records in the owner of h[i] where its entry is.
func (h timeHeap) setPos(i int) {
	if it := h[i]; it.sess != nil {
		it.sess.tpos = i + 1
	} else {
		it.rec.tpos = int32(i + 1)
	}
}

func (h timeHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h.setPos(i)
	h.setPos(j)
}

func (h *timeHeap) push(it timeItem) {
	*h = append(*h, it)
	h.setPos(len(*h) - 1)
	h.up(len(*h) - 1)
}

// remove takes out the entry at index i and clears its owner's position.
func (h *timeHeap) remove(i int) timeItem {
	old := *h
	n := len(old) - 1
	if i != n {
		old.swap(i, n)
	}
	it := old[n]
	old[n] = timeItem{}
	*h = old[:n]
	if i != n {
		h.fix(i)
	}
	if it.sess != nil {
		it.sess.tpos = 0
	} else {
		it.rec.tpos = 0
	}
	return it
}

// pop removes and returns the earliest entry.
func (h *timeHeap) pop() timeItem { return h.remove(0) }

// fix restores the heap order after the entry at i changed its time.
func (h timeHeap) fix(i int) {
	if !h.up(i) {
		h.down(i)
	}
}

func (h timeHeap) up(j int) bool {
	moved := false
	for j > 0 {
		i := (j - 1) / 2
		if h[i].at <= h[j].at {
			break
		}
		h.swap(i, j)
		j = i
		moved = true
	}
	return moved
}

func (h timeHeap) down(i int) {
	n := len(h)
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if r := j + 1; r < n && h[r].at < h[j].at {
			j = r
		}
		if h[i].at <= h[j].at {
			return
		}
		h.swap(i, j)
		i = j
	}
}

// next returns the earliest due time, or 0 when empty.
func (h timeHeap) next() int64 {
	if len(h) == 0 {
		return 0
	}
	return h[0].at
}
