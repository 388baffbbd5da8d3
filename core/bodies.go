package core

import (
	"cmp"
	"slices"
)

// Reading bodies for a delivery.
//
// A receive that finds a backlog hands out up to its credit of messages
// whose bodies are only on disk, usually with consecutive sequence
// numbers. loadBodies reads them with one ordered scan per body owner
// instead of one point lookup each, which costs an iterator set-up per
// message.

// scanDensity is how sparse a run of wanted sequence numbers may be (span
// per wanted message) for one scan to beat point lookups.
const scanDensity = 4

// loadBodies fills got[i].loaded for every taken message without a body
// in memory. Messages a scan does not find are left for message() to look
// up one by one (and report).
func (q *queue) loadBodies(got []taken) error {
	byOwner := make(map[uint64][]int)
	for i := range got {
		if got[i].msg == nil {
			byOwner[got[i].st.owner] = append(byOwner[got[i].st.owner], i)
		}
	}
	for owner, idx := range byOwner {
		if len(idx) < 2 {
			continue
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(got[a].seq, got[b].seq) })
		lo, hi := got[idx[0]].seq, got[idx[len(idx)-1]].seq
		if hi-lo+1 > int64(len(idx))*scanDensity {
			continue
		}
		want := make(map[int64]int, len(idx))
		for _, i := range idx {
			want[got[i].seq] = i
		}
		found := 0
		err := q.b.store.Scan(idKey(tabBody, owner), seqKey(tabBody, owner, lo), func(k, v []byte) (bool, error) {
			seq := seqFromKey(k)
			if seq > hi {
				return false, nil
			}
			i, ok := want[seq]
			if !ok {
				return true, nil
			}
			m, err := decodeBody(v)
			if err != nil {
				return false, err
			}
			got[i].loaded = m
			found++
			return found < len(idx), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
