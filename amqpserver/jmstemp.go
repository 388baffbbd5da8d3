package amqpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// JMS temporary queues and topics (JMSContext.createTemporaryQueue and
// createTemporaryTopic, for request-reply): Qpid JMS attaches a sender
// whose target is dynamic, with the capability "temporary-queue" or
// "temporary-topic" and the lifetime policy delete-on-close. omnibus
// makes a queue (or topic) with a name of its own, "jms-temp-" and 16 hex
// digits, answers the attach with it as the target's address, and
// deletes the entity when that link goes, by the client's
// TemporaryQueue.delete or with its connection. Making one needs Manage
// on the name.

const (
	capTempQueue encoding.Symbol = "temporary-queue"
	capTempTopic encoding.Symbol = "temporary-topic"
)

// attachJMSTemporary answers a sender's attach with a dynamic target: it
// makes the entity in a helper goroutine and attaches the link to it.
func (l *link) attachJMSTemporary(a *frames.Attach) {
	c := l.s.c
	kind := core.KindQueue
	if hasCapability(a.Target.Capabilities, capTempTopic) {
		kind = core.KindTopic
	} else if !hasCapability(a.Target.Capabilities, capTempQueue) {
		l.refuse(a, errorf(frames.CondNotImplemented, "Only temporary queues and topics (target capability temporary-queue or temporary-topic) can be made by a dynamic target."))
		return
	}
	var b [8]byte
	rand.Read(b[:])
	name := "jms-temp-" + hex.EncodeToString(b[:])
	if !c.auth.allows(name, sas.Manage) {
		l.refuse(a, errorf(frames.CondUnauthorizedAccess,
			"Unauthorized access. 'Manage' claim(s) are required to create the temporary %s '%s'.", kind, name))
		return
	}
	c.goWork(func() {
		_, err := c.broker().CreateEntity(c.ctx, core.Entity{Kind: kind, Name: name})
		posted := c.post(func() {
			if err != nil {
				if !l.detached && l.s.live() {
					l.refuse(a, amqpError(err))
				}
				return
			}
			l.temporary = name
			if l.detached || !l.s.live() {
				c.deleteTemporary(name)
				return
			}
			l.address, l.entity = name, name
			reply := *a
			target := *a.Target
			target.Address = name
			reply.Target = &target
			l.attachSender(&reply)
		})
		if !posted && err == nil {
			c.deleteTemporary(name)
		}
	})
}

// deleteTemporary deletes a temporary queue or topic whose link went.
// Not in a helper of c: the connection may be ending, and the deletion
// must happen all the same.
func (c *conn) deleteTemporary(name string) {
	b, log := c.broker(), c.log
	go func() {
		if err := b.DeleteEntity(context.Background(), name); err != nil && core.CodeOf(err) != core.CodeNotFound {
			log.Warn("could not delete a JMS temporary destination", zap.String("entity", name), zap.Error(err))
		}
	}()
}
