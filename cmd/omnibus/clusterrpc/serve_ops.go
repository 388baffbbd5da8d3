package clusterrpc

import (
	"context"
	"fmt"

	"github.com/omnibusmq/omnibus/core"
)

// call runs one operation on g's broker and returns its result, encoded
// into e; held gets the locks a peek-lock receive handed out.
func (c *serverConn) call(ctx context.Context, g Group, op byte, d *dec, held *heldLocks, e *enc) ([]byte, error) {
	b := g.Broker
	var err error
	switch op {
	case opSend:
		path, msgs := d.string(), d.messages()
		if d.err == nil {
			var seqs []int64
			seqs, err = b.Send(ctx, path, msgs...)
			e.int64s(seqs)
		}
	case opTransfer:
		ts := d.transfers()
		if d.err == nil {
			n, terr := b.ApplyTransfers(ctx, ts)
			e.uvarint(uint64(n))
			e.bool(terr != nil)
			if terr != nil {
				e.error(terr)
			}
		}
	case opReceive:
		ctx, cancel := withDeadline(ctx, d)
		defer cancel()
		path := d.string()
		opts := core.ReceiveOptions{Mode: core.ReceiveMode(d.byte()), Max: int(d.uvarint()), MaxBytes: int(d.uvarint()), Session: d.sessionLock()}
		if d.err == nil {
			var msgs []*core.Message
			msgs, err = b.Receive(ctx, path, opts)
			e.messages(msgs)
			if opts.Mode == core.PeekLock {
				held.hold(path, msgs)
			}
		}
	case opSettle:
		path, tok, o := d.string(), d.token(), d.outcome()
		if d.err == nil {
			err = b.Settle(ctx, path, tok, o)
		}
	case opCompleteMany:
		path := d.string()
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			return nil, errMalformed
		}
		toks := make([]core.LockToken, n)
		for i := range toks {
			toks[i] = d.token()
		}
		durable := d.bool()
		if d.err == nil {
			errs := b.CompleteMany(path, toks, durable)
			for _, x := range errs {
				e.bool(x != nil)
				if x != nil {
					e.error(x)
				}
			}
		}
	case opRenewLock:
		path, tok := d.string(), d.token()
		if d.err == nil {
			until, rerr := b.RenewLock(ctx, path, tok)
			err = rerr
			e.time(until)
		}
	case opReceiveDeferred:
		path, mode, seqs := d.string(), core.ReceiveMode(d.byte()), d.int64s()
		if d.err == nil {
			var msgs []*core.Message
			msgs, err = b.ReceiveDeferred(ctx, path, mode, seqs)
			e.messages(msgs)
			if mode == core.PeekLock {
				held.hold(path, msgs)
			}
		}
	case opPeek:
		path := d.string()
		opts := core.PeekOptions{From: d.varint(), Max: int(d.uvarint()), SessionID: d.string(), MaxBytes: int(d.uvarint())}
		if d.err == nil {
			var msgs []*core.Message
			msgs, err = b.Peek(ctx, path, opts)
			e.messages(msgs)
		}
	case opCancelScheduled:
		path, seqs := d.string(), d.int64s()
		if d.err == nil {
			err = b.CancelScheduled(ctx, path, seqs)
		}
	case opDeleteMessages:
		path := d.string()
		opts := core.DeleteOptions{Max: int(d.uvarint()), Before: d.time(), SessionID: d.string()}
		if d.err == nil {
			var n int
			n, err = b.DeleteMessages(ctx, path, opts)
			e.uvarint(uint64(n))
		}
	case opAcceptSession:
		ctx, cancel := withDeadline(ctx, d)
		defer cancel()
		path, id := d.string(), d.string()
		if d.err == nil {
			var sl *core.SessionLock
			sl, err = b.AcceptSession(ctx, path, id)
			e.sessionLock(sl)
		}
	case opRenewSessionLock:
		path, sl := d.string(), d.sessionLock()
		if d.err == nil && sl != nil {
			until, rerr := b.RenewSessionLock(ctx, path, sl)
			err = rerr
			e.time(until)
		}
	case opCloseSession:
		path, sl := d.string(), d.sessionLock()
		if d.err == nil && sl != nil {
			err = b.CloseSession(path, sl)
		}
	case opSessionEnded:
		path, sl := d.string(), d.sessionLock()
		if d.err == nil && sl != nil {
			var ended <-chan struct{}
			if ended, err = b.SessionLockEnded(path, sl); err == nil {
				select {
				case <-ended:
				case <-ctx.Done(): // the connection ended: nobody hears the answer
					err = busy("the call was cancelled")
				}
			}
		}
	case opGetSessionState:
		path, sl := d.string(), d.sessionLock()
		if d.err == nil && sl != nil {
			var st []byte
			st, err = b.GetSessionState(ctx, path, sl)
			e.bool(st != nil)
			e.bytes(st)
		}
	case opSetSessionState:
		path, sl := d.string(), d.sessionLock()
		var state []byte
		if d.bool() {
			state = d.bytes()
			if state == nil {
				state = []byte{}
			}
		}
		if d.err == nil && sl != nil {
			err = b.SetSessionState(ctx, path, sl, state)
		}
	case opListSessions:
		path, since := d.string(), d.time()
		if d.err == nil {
			var ids []string
			ids, err = b.ListSessions(ctx, path, since)
			e.json(ids)
		}
	case opSessions:
		path, after, max := d.string(), d.string(), int(d.uvarint())
		if d.err == nil {
			infos, total, serr := b.Sessions(path, after, max)
			err = serr
			e.json(infos)
			e.uvarint(uint64(total))
		}
	case opCreateEntity, opUpdateEntity:
		ent := d.entity()
		if d.err == nil && ent != nil {
			var out *core.Entity
			if op == opCreateEntity {
				out, err = b.CreateEntity(ctx, *ent)
			} else {
				out, err = b.UpdateEntity(ctx, *ent)
			}
			e.entity(out)
		}
	case opDeleteEntity:
		path := d.string()
		if d.err == nil {
			err = b.DeleteEntity(ctx, path)
		}
	case opGetEntity:
		path := d.string()
		if d.err == nil {
			var out *core.Entity
			out, err = b.GetEntity(path)
			e.entity(out)
		}
	case opListEntities:
		kind, topic := core.EntityKind(d.byte()), d.string()
		if d.err == nil {
			var es []*core.Entity
			es, err = b.ListEntities(kind, topic)
			e.uvarint(uint64(len(es)))
			for _, x := range es {
				e.entity(x)
			}
		}
	case opAddRule:
		path, r := d.string(), d.rule()
		if d.err == nil {
			err = b.AddRule(ctx, path, r)
		}
	case opRemoveRule:
		path, name := d.string(), d.string()
		if d.err == nil {
			err = b.RemoveRule(ctx, path, name)
		}
	case opListRules:
		path := d.string()
		if d.err == nil {
			var rs []core.Rule
			rs, err = b.ListRules(path)
			e.rules(rs)
		}
	case opCounts:
		path := d.string()
		if d.err == nil {
			var cs core.Counts
			cs, err = b.Counts(path)
			e.json(cs)
		}
	case opEntityStats:
		path := d.string()
		if d.err == nil {
			var st core.EntityStats
			st, err = b.EntityStats(path)
			e.json(st)
		}
	case opTxnBegin, opTxnSend, opTxnSettle, opTxnRenewLock, opTxnCommit, opTxnRollback:
		return c.txnCall(ctx, b, op, d)
	default:
		return nil, fmt.Errorf("clusterrpc: operation %d is not a call", op)
	}
	if d.err != nil {
		return nil, d.err
	}
	if err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

// txnCall runs a transaction operation. A transaction lives on the
// connection that began it: when the connection ends it is rolled back.
func (c *serverConn) txnCall(ctx context.Context, b *core.Broker, op byte, d *dec) ([]byte, error) {
	e := &enc{}
	if op == opTxnBegin {
		c.mu.Lock()
		c.nextTxn++
		id := c.nextTxn
		if c.txns == nil {
			c.mu.Unlock()
			return nil, &core.Error{Code: core.CodeServerBusy, Msg: "connection closing"}
		}
		c.txns[id] = b.BeginTxn()
		c.mu.Unlock()
		e.uvarint(id)
		return e.b, nil
	}
	id := d.uvarint()
	c.mu.Lock()
	t := c.txns[id]
	c.mu.Unlock()
	if t == nil {
		return nil, &core.Error{Code: core.CodeBadRequest, Msg: "The transaction has already been discharged."}
	}
	var err error
	switch op {
	case opTxnSend:
		path, via, msgs := d.string(), d.string(), d.messages()
		if d.err == nil {
			err = t.Send(path, via, msgs)
		}
	case opTxnSettle:
		path, tok, o := d.string(), d.token(), d.outcome()
		if d.err == nil {
			err = t.Settle(path, tok, o)
		}
	case opTxnRenewLock:
		path, tok := d.string(), d.token()
		if d.err == nil {
			until, rerr := t.RenewLock(ctx, path, tok)
			err = rerr
			e.time(until)
		}
	case opTxnCommit, opTxnRollback:
		c.mu.Lock()
		delete(c.txns, id)
		c.mu.Unlock()
		if op == opTxnCommit {
			err = t.Commit()
		} else {
			t.Rollback()
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if err != nil {
		return nil, err
	}
	e.time(t.Deadline())
	return e.b, nil
}

// hold records the locks of msgs, handed out on path.
func (h *heldLocks) hold(path string, msgs []*core.Message) {
	h.path = path
	for _, m := range msgs {
		h.toks = append(h.toks, m.LockToken)
	}
}
