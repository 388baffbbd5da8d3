package core

import (
	"github.com/omnibusmq/omnibus/storage"
)

// Shared bodies.
//
// A topic stores a message's body once for all the subscriptions whose
// copies share it, and counts the copies (entity.refs) so that the body
// goes with its last copy. A write that removes or moves a copy drops its
// reference when it is planned (beginRelease) and settles it when its
// batch is applied or abandoned (endRelease, from write.commit and
// write.abort): a failed write takes the reference back.
//
// The body is deleted in the batch of the write that drops the last
// reference, unless another write releasing a copy of the same body is
// still in flight: its failure would bring its copy back, so the deletion
// then falls to whichever of them finishes last, in a batch of its own
// (orphans.go). A body deleted that way is garbage if the process dies
// first; Broker.Check reports such bodies.

// bodyRefs counts the references to one shared body: n subscription
// copies point at it, and releasing of them are being removed or moved
// by writes that have not finished yet.
type bodyRefs struct {
	n, releasing int32
}

// addRefs counts the subscription copies of a durable topic send that
// share the topic's body record.
func (e *entity) addRefs(places []placement) {
	e.refs.Lock()
	defer e.refs.Unlock()
	if e.refs.m == nil {
		e.refs.m = make(map[int64]bodyRefs)
	}
	for _, pl := range places {
		if pl.r.owner == e.id {
			c := e.refs.m[pl.r.seq]
			c.n++
			e.refs.m[pl.r.seq] = c
		}
	}
}

// dropRefs drops the references of copies that will never be delivered:
// their subscription was deleted between the send's commit and its
// publication. Bodies left without a reference are deleted at once. This
// is the one storage write made under an inlet mutex (publish), and only
// in that rare case.
func (e *entity) dropRefs(b *Broker, seqs []int64) {
	var orphans storage.Batch
	e.refs.Lock()
	for _, seq := range seqs {
		c := e.refs.m[seq]
		c.n--
		if c.n <= 0 && c.releasing <= 0 {
			delete(e.refs.m, seq)
			orphans.Delete(seqKey(tabBody, e.id, seq))
			continue
		}
		e.refs.m[seq] = c
	}
	e.refs.Unlock()
	b.deleteOrphans(&orphans)
}

// beginRelease drops one reference to a shared body, for a write that
// removes or moves a subscription copy and has already released mine
// others of the same body. It reports whether that write should delete
// the body too: the copy was the last, and no other write releasing one
// is still in flight (whose failure would bring its copy back).
func (e *entity) beginRelease(seq int64, mine int32) (deleteBody bool) {
	e.refs.Lock()
	defer e.refs.Unlock()
	if e.refs.m == nil {
		e.refs.m = make(map[int64]bodyRefs)
	}
	c := e.refs.m[seq]
	c.n--
	c.releasing++
	e.refs.m[seq] = c
	return c.n <= 0 && c.releasing == mine+1
}

// endRelease ends a release once its write is over. copyGone says the
// copy is gone (the write committed, or the subscription was deleted);
// otherwise it is back and so is its reference. bodyGone says the write
// deleted the body. It reports whether the body must now be deleted
// apart: its last copy is gone, no release is in flight any more, and no
// write deleted it.
func (e *entity) endRelease(seq int64, copyGone, bodyGone bool) (deleteBody bool) {
	e.refs.Lock()
	defer e.refs.Unlock()
	c := e.refs.m[seq]
	c.releasing--
	if !copyGone {
		c.n++
	}
	if c.n <= 0 && c.releasing <= 0 {
		delete(e.refs.m, seq)
		return !bodyGone
	}
	e.refs.m[seq] = c
	return false
}
