package clusterrpc

import (
	"context"

	"github.com/omnibusmq/omnibus/core"
)

// ApplyTransfers hands transfers from this node's outbox to the group's
// broker on the node leading it (core.Broker.ApplyTransfers): how many of
// ts, from the first, are applied, and why the next one is not.
func (b *Backend) ApplyTransfers(ctx context.Context, ts []*core.Transfer) (int, error) {
	e := &enc{}
	e.transfers(ts)
	if e.err != nil {
		return 0, e.err
	}
	d, err := b.do(context.WithoutCancel(ctx), opTransfer, e, true)
	if err != nil {
		return 0, err
	}
	n := int(d.uvarint())
	var terr error
	if d.bool() {
		terr = d.error()
	}
	if d.err != nil {
		return 0, d.err
	}
	if n > len(ts) {
		return 0, errMalformed
	}
	return n, terr
}

// transfers encodes ts: a count, then each one's id, target, hops and
// message.
func (e *enc) transfers(ts []*core.Transfer) {
	e.uvarint(uint64(len(ts)))
	for _, t := range ts {
		e.b = append(e.b, t.ID[:]...)
		e.string(t.Target)
		e.uvarint(uint64(t.Hops))
		e.message(t.Message)
	}
}

func (d *dec) transfers() []*core.Transfer {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	out := make([]*core.Transfer, 0, n)
	for range n {
		t := &core.Transfer{}
		copy(t.ID[:], d.raw(16))
		t.Target = d.string()
		t.Hops = int(d.uvarint())
		t.Message = d.message()
		if d.err != nil {
			return nil
		}
		out = append(out, t)
	}
	return out
}
