package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Queue returns a queue of the named profile (see [Profiles]) for this
// scenario: a fresh one deleted when the scenario ends, or, on a
// predeclared target, the Config.json queue of that name, drained first.
func (t *T) Queue(profile string) string {
	name, err := t.tryQueue(profile)
	t.must(err, "creating queue %s", name)
	return name
}

// tryQueue is [T.Queue] returning the management error instead of
// failing, for profiles an endpoint may legitimately refuse.
func (t *T) tryQueue(profile string) (string, error) {
	p := t.profile(profile, false)
	if name, ok := t.usePredeclared(p); ok {
		return name, nil
	}
	props := *p.Queue
	props.ForwardTo = t.resolve(props.ForwardTo)
	props.ForwardDeadLetteredMessagesTo = t.resolve(props.ForwardDeadLetteredMessagesTo)
	name := profile + "-" + suffix()
	if _, err := t.target.admin.CreateQueue(t.ctx, name, &admin.CreateQueueOptions{Properties: &props}); err != nil {
		return name, err
	}
	t.names[profile] = name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = t.target.admin.DeleteQueue(ctx, name, nil)
	})
	return name, nil
}

// Topic returns a topic of the named profile with its subscriptions (see
// [T.Queue]).
func (t *T) Topic(profile string) string {
	p := t.profile(profile, true)
	if name, ok := t.usePredeclared(p); ok {
		return name
	}
	name := profile + "-" + suffix()
	_, err := t.target.admin.CreateTopic(t.ctx, name, &admin.CreateTopicOptions{Properties: p.Topic})
	t.must(err, "creating topic %s", name)
	t.names[profile] = name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = t.target.admin.DeleteTopic(ctx, name, nil)
	})
	for _, s := range p.Subs {
		opts := &admin.CreateSubscriptionOptions{Properties: s.Props}
		_, err := t.target.admin.CreateSubscription(t.ctx, name, s.Name, opts)
		t.must(err, "creating subscription %s/%s", name, s.Name)
		if len(s.Rules) > 0 {
			_, err := t.target.admin.DeleteRule(t.ctx, name, s.Name, "$Default", nil)
			t.must(err, "removing $Default from %s/%s", name, s.Name)
		}
		for _, r := range s.Rules {
			_, err := t.target.admin.CreateRule(t.ctx, name, s.Name, &admin.CreateRuleOptions{Name: &r.Name, Filter: r.Filter, Action: r.Action})
			t.must(err, "creating rule %s on %s/%s", r.Name, name, s.Name)
		}
	}
	return name
}

// profile looks a profile up, records its use, and fails the scenario if
// it is unknown or of the wrong kind.
func (t *T) profile(name string, topic bool) Profile {
	t.used = append(t.used, name)
	p, ok := profileByName(name)
	if !ok {
		t.Abortf("scenario uses profile %q, which is not in the profile table", name)
	}
	if p.IsTopic() != topic {
		t.Abortf("profile %q is used as the wrong kind of entity", name)
	}
	return p
}

// usePredeclared returns the Config.json entity for p on predeclared
// targets (and in the recording pass, which only notes profile names).
func (t *T) usePredeclared(p Profile) (string, bool) {
	if t.target.recording {
		return p.Name, true
	}
	if !t.target.Predeclared {
		return "", false
	}
	if p.CloudOnly != "" {
		t.Skipf("profile %s cannot be predeclared: %s", p.Name, p.CloudOnly)
	}
	t.names[p.Name] = p.Name
	if p.IsTopic() {
		for _, s := range p.Subs {
			t.drain(p.Name, s.Name, s.Props != nil && s.Props.RequiresSession != nil && *s.Props.RequiresSession)
		}
	} else {
		t.drain(p.Name, "", p.Queue.RequiresSession != nil && *p.Queue.RequiresSession)
	}
	return p.Name, true
}

// resolve maps a profile name in a forwarding property to the entity this
// scenario created for it.
func (t *T) resolve(profile *string) *string {
	if profile == nil {
		return nil
	}
	if name, ok := t.names[*profile]; ok {
		return &name
	}
	t.Abortf("profile forwards to %q, which the scenario must create first", *profile)
	return nil
}

// drain removes every message of a predeclared entity (its sessions, its
// dead-letter subqueue, deferred and scheduled messages) so a scenario
// starts from empty.
func (t *T) drain(entity, sub string, sessions bool) {
	if sessions {
		t.drainSessions(entity, sub)
	}
	for _, sq := range []azservicebus.SubQueue{0, azservicebus.SubQueueDeadLetter} {
		if sessions && sq == 0 {
			continue
		}
		r := t.Receiver(entity, sub, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, SubQueue: sq})
		// Messages a previous scenario left locked come back when their
		// (5 s) locks lapse: keep draining until peek shows none active.
		for deadline := time.Now().Add(8 * time.Second); ; {
			drainReceiver(t, r)
			t.dropDeferred(r)
			if !t.hasActive(r) || time.Now().After(deadline) {
				break
			}
			wait(t, time.Second)
		}
		_ = r.Close(t.ctx)
	}
	if sub == "" && !sessions {
		t.cancelScheduled(entity)
	}
}

func drainReceiver(t *T, r messageReceiver) {
	for {
		ctx, cancel := context.WithTimeout(t.ctx, time.Second)
		msgs, err := r.ReceiveMessages(ctx, 100, nil)
		cancel()
		if len(msgs) == 0 || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
			return
		}
	}
}

// dropDeferred receives-and-deletes the deferred messages peek shows.
func (t *T) dropDeferred(r *azservicebus.Receiver) {
	peeked, err := r.PeekMessages(t.ctx, 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr[int64](0)})
	if err != nil {
		return
	}
	var seqs []int64
	for _, m := range peeked {
		if m.State == azservicebus.MessageStateDeferred {
			seqs = append(seqs, *m.SequenceNumber)
		}
	}
	if len(seqs) > 0 {
		_, _ = r.ReceiveDeferredMessages(t.ctx, seqs, nil)
	}
}

// hasActive reports whether peek shows active (possibly locked) messages.
func (t *T) hasActive(r *azservicebus.Receiver) bool {
	peeked, err := r.PeekMessages(t.ctx, 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr[int64](0)})
	if err != nil {
		return false
	}
	for _, m := range peeked {
		if m.State == azservicebus.MessageStateActive {
			return true
		}
	}
	return false
}

// cancelScheduled cancels the scheduled messages of a queue.
func (t *T) cancelScheduled(queue string) {
	r := t.Receiver(queue, "", nil)
	peeked, err := r.PeekMessages(t.ctx, 250, nil)
	if err != nil {
		return
	}
	var seqs []int64
	for _, m := range peeked {
		if m.State == azservicebus.MessageStateScheduled {
			seqs = append(seqs, *m.SequenceNumber)
		}
	}
	if len(seqs) > 0 {
		_ = t.Sender(queue).CancelScheduledMessages(t.ctx, seqs, nil)
	}
}

// drainSessions accepts every session with messages, empties it and
// clears its state.
func (t *T) drainSessions(entity, sub string) {
	opts := &azservicebus.SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}
	for {
		ctx, cancel := context.WithTimeout(t.ctx, 3*time.Second)
		var r *azservicebus.SessionReceiver
		var err error
		if sub == "" {
			r, err = t.Client().AcceptNextSessionForQueue(ctx, entity, opts)
		} else {
			r, err = t.Client().AcceptNextSessionForSubscription(ctx, entity, sub, opts)
		}
		cancel()
		if err != nil {
			return
		}
		drainReceiver(t, r)
		_ = r.SetSessionState(t.ctx, nil, nil)
		_ = r.Close(t.ctx)
	}
}
