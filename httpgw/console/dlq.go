package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Bounds of one resubmit or purge call: the page calls again while the
// answer says there is more, so no call holds a connection (or message
// locks) for long.
const (
	// resubmitBatch is how many dead-lettered messages one round locks.
	resubmitBatch = 100
	// maxResubmitAll is the most messages one "all" call moves.
	maxResubmitAll = 2000
	// maxResubmitScan is how many dead-lettered messages a call for
	// chosen sequence numbers locks while looking for them; messages
	// further back are reported as not found.
	maxResubmitScan = 5000
	// maxPurge is the most messages one purge call deletes.
	maxPurge = 100 * core.MaxDeleteMessages
)

type resubmitRequest struct {
	Path      string  `json:"path"` // the queue or subscription whose dead letters go back
	Sequences []int64 `json:"sequences"`
	All       bool    `json:"all"`
}

type resubmitResponse struct {
	Resubmitted int     `json:"resubmitted"`
	Target      string  `json:"target"`
	NotFound    []int64 `json:"notFound,omitempty"`
	More        bool    `json:"more"`
}

// resubmit sends dead-lettered messages back to their entity and removes
// them from the dead-letter subqueue: the chosen sequence numbers, or all
// (up to maxResubmitAll a call). A queue's messages go back to the queue;
// a subscription's to its topic, the only place a message can be sent to
// (so the topic's other subscriptions get a copy too, if their filters
// match). Each message is sent again (with a new sequence number, its
// properties but the dead-letter reason and description) and then
// completed in the subqueue; if the complete fails, the message is in
// both places rather than in neither. Needs Listen on the entity and
// Send on the target.
func (h *Handler) resubmit(w http.ResponseWriter, r *http.Request) {
	var req resubmitRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Path == "" || (!req.All && len(req.Sequences) == 0) {
		writeJSONError(w, http.StatusBadRequest, "resubmit needs a path and sequences, or all")
		return
	}
	if !h.authorize(w, r, req.Path, sas.Listen) {
		return
	}
	e, err := h.broker(r).GetEntity(req.Path)
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	target := e.Name
	if e.Kind == core.KindSubscription {
		target = e.Topic
	} else if e.Kind != core.KindQueue {
		writeJSONError(w, http.StatusBadRequest, "resubmit from a queue or a subscription")
		return
	}
	if !h.authorize(w, r, target, sas.Send) {
		return
	}
	dlq := e.Path() + "/$DeadLetterQueue"
	out := resubmitResponse{Target: target}
	if req.All {
		out.Resubmitted, out.More, err = h.resubmitAll(r.Context(), h.broker(r), dlq, target)
	} else {
		out.Resubmitted, out.NotFound, err = h.resubmitChosen(r.Context(), h.broker(r), dlq, target, req.Sequences)
	}
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// receiveNow locks up to n available messages of path without waiting
// for more to arrive.
func (h *Handler) receiveNow(ctx context.Context, b *core.Broker, path string, n int) ([]*core.Message, error) {
	now, cancel := context.WithDeadline(ctx, time.Unix(1, 0))
	defer cancel()
	return b.Receive(now, path, core.ReceiveOptions{Mode: core.PeekLock, Max: n})
}

func (h *Handler) resubmitAll(ctx context.Context, b *core.Broker, dlq, target string) (done int, more bool, err error) {
	for done < maxResubmitAll {
		got, err := h.receiveNow(ctx, b, dlq, min(resubmitBatch, maxResubmitAll-done))
		if err != nil || len(got) == 0 {
			return done, false, err
		}
		if err := h.moveBack(ctx, b, dlq, target, got); err != nil {
			return done, false, err
		}
		done += len(got)
	}
	return done, true, nil
}

func (h *Handler) resubmitChosen(ctx context.Context, b *core.Broker, dlq, target string, seqs []int64) (done int, notFound []int64, err error) {
	want := make(map[int64]bool, len(seqs))
	for _, s := range seqs {
		want[s] = true
	}
	// Messages not chosen stay locked until the end, or the next receive
	// would hand them out again; then they are released untouched.
	var others []core.LockToken
	defer func() {
		for _, tok := range others {
			_ = b.Settle(context.WithoutCancel(ctx), dlq, tok, core.Outcome{Kind: core.Release})
		}
	}()
	scanned := 0
	for len(want) > 0 && scanned < maxResubmitScan {
		got, err := h.receiveNow(ctx, b, dlq, resubmitBatch)
		if err != nil {
			return done, nil, err
		}
		if len(got) == 0 {
			break
		}
		scanned += len(got)
		var chosen []*core.Message
		for _, m := range got {
			if want[m.SequenceNumber] {
				delete(want, m.SequenceNumber)
				chosen = append(chosen, m)
			} else {
				others = append(others, m.LockToken)
			}
		}
		if len(chosen) > 0 {
			if err := h.moveBack(ctx, b, dlq, target, chosen); err != nil {
				for _, m := range chosen {
					others = append(others, m.LockToken)
				}
				return done, nil, err
			}
			done += len(chosen)
		}
	}
	for s := range want {
		notFound = append(notFound, s)
	}
	return done, notFound, nil
}

// moveBack sends copies of locked dead-lettered messages to target, then
// completes them in the dead-letter subqueue.
func (h *Handler) moveBack(ctx context.Context, b *core.Broker, dlq, target string, msgs []*core.Message) error {
	copies := make([]*core.Message, len(msgs))
	toks := make([]core.LockToken, len(msgs))
	var err error
	for i, m := range msgs {
		toks[i] = m.LockToken
		if copies[i], err = resubmitCopy(m); err != nil {
			err = fmt.Errorf("message %d: %w", m.SequenceNumber, err)
		}
	}
	if err == nil {
		_, err = b.Send(ctx, target, copies...)
	}
	if err != nil {
		for _, tok := range toks {
			_ = b.Settle(context.WithoutCancel(ctx), dlq, tok, core.Outcome{Kind: core.Release})
		}
		return err
	}
	return errors.Join(b.CompleteMany(dlq, toks, true)...)
}

// resubmitCopy is what goes back: what the sender set, without what the
// broker added (sequence number, enqueue time, delivery count, lock,
// dead-letter reason and description).
func resubmitCopy(m *core.Message) (*core.Message, error) {
	props, err := m.Properties()
	if err != nil {
		return nil, err
	}
	props = maps.Clone(props)
	delete(props, "DeadLetterReason")
	delete(props, "DeadLetterErrorDescription")
	return &core.Message{
		MessageID: m.MessageID, CorrelationID: m.CorrelationID, SessionID: m.SessionID,
		ReplyToSessionID: m.ReplyToSessionID, To: m.To, ReplyTo: m.ReplyTo, Subject: m.Subject,
		ContentType: m.ContentType, ContentEncoding: m.ContentEncoding, PartitionKey: m.PartitionKey,
		ViaPartitionKey: m.ViaPartitionKey, TimeToLive: m.TimeToLive, UserID: m.UserID,
		Priority: m.Priority, Durable: true, ApplicationProperties: props,
		BodyType: m.BodyType, Body: m.Body, CreationTime: m.CreationTime,
	}, nil
}

type purgeRequest struct {
	Path       string `json:"path"`
	DeadLetter bool   `json:"deadLetter"`
}

type purgeResponse struct {
	Deleted int  `json:"deleted"`
	More    bool `json:"more"`
}

// purge deletes the active, unlocked messages of an entity or of its
// dead-letter subqueue with the batch delete the SDKs' PurgeMessages
// uses: locked, deferred and scheduled messages stay. Up to maxPurge a
// call. Needs Listen, as that batch delete does.
func (h *Handler) purge(w http.ResponseWriter, r *http.Request) {
	var req purgeRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Path == "" {
		writeJSONError(w, http.StatusBadRequest, "purge needs a path")
		return
	}
	if !h.authorize(w, r, req.Path, sas.Listen) {
		return
	}
	path := req.Path
	if req.DeadLetter {
		path += "/$DeadLetterQueue"
	}
	var out purgeResponse
	for out.Deleted < maxPurge {
		n, err := h.broker(r).DeleteMessages(r.Context(), path, core.DeleteOptions{Max: core.MaxDeleteMessages})
		if err != nil {
			h.writeCoreError(w, r, err)
			return
		}
		out.Deleted += n
		if n < core.MaxDeleteMessages {
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
	out.More = true
	writeJSON(w, http.StatusOK, out)
}
