package core

// Transactional sends across data groups.
//
// A transaction's send-via names the entity it goes through (via, the
// transaction's entity) and the one its messages are stored in. When the
// latter lives in another data group (TransferConfig.Locate), the
// messages cannot be written with the rest of the transaction: they are
// written into this group's outbox instead, in the transaction's one
// write, so a rollback (or a failed commit) leaves no trace of them and a
// commit hands them to the pump, which delivers each to its group once
// (transfer.go). This is Service Bus's send-via: the message goes into
// the via entity's transfer queue with the transaction and is forwarded
// once it committed.
//
// The via entity must be a queue without partitions: a transfer its
// destination refuses for good (gone, disabled, full, a message it does
// not take) is dead-lettered in the via queue's dead-letter subqueue,
// where Service Bus puts it in the via entity's transfer dead-letter
// queue. A topic or a partitioned queue has no single dead-letter
// subqueue of this group to keep such a message, and is refused as via.

// txnTransferGroup returns the data group of the queue or topic at path
// that a transaction's send via the entity at via stores into, when this
// broker does not hold it (notFound is its lookup's error). It fails with
// notFound when path is placed in no other group, and with a bad request
// when via cannot be the source of a transfer.
func (b *Broker) txnTransferGroup(path, via string, notFound error) (uint64, error) {
	a := ParseAddress(path)
	g, err := b.locateElsewhere(a.Entity)
	if err != nil {
		return 0, err
	}
	if g == 0 {
		return 0, notFound
	}
	if _, err := b.txnTransferSource(via, path, g); err != nil {
		return 0, err
	}
	return g, nil
}

// txnTransferSource returns the entity the transfers of a send via the
// entity at via leave: a queue without partitions of this broker.
func (b *Broker) txnTransferSource(via, path string, g uint64) (*entity, error) {
	e, err := b.lookup(ParseAddress(via))
	if err != nil {
		return nil, err
	}
	if d := e.desc.Load(); d.Kind != KindQueue || e.q == nil || e.parts != nil {
		return nil, errf(CodeBadRequest, "A transaction cannot send via '%s' to '%s': '%s' is in another data group (%d), and a send-via across data groups must go through a queue without partitions (whose dead-letter subqueue keeps what the destination refuses).",
			d.Path(), path, path, g)
	}
	return e, nil
}

// planTxnTransfer plans s, a transaction's send to an entity of another
// group, into p as transfers leaving its via queue.
func (b *Broker) planTxnTransfer(p *sendPlan, s txnSend) error {
	src, err := b.txnTransferSource(s.via, s.path, s.group)
	if err != nil {
		return err
	}
	return p.addTransfers(src, transferTarget{group: s.group, name: ParseAddress(s.path).Entity}, s.msgs, 0)
}
