package amqpserver

import (
	"math"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Queues and topics made on the fly for JMS clients, as Service Bus
// Premium makes them: a connection whose open carries the property
// com.microsoft:is-client-provider = true (Microsoft's
// ServiceBusJmsConnectionFactory sets it) that attaches a producer or
// consumer to a queue or topic that does not exist (the terminus's
// capability "queue" or "topic" says which) gets it made, with the
// auto-delete-on-idle its open asks for
// (com.microsoft:queue-auto-delete-on-idle-duration-in-seconds and
// com.microsoft:topic-…, at least Service Bus's 5 minutes), and needs Manage on the name for it. Other
// clients get amqp:not-found, as always.

// Open properties of Microsoft's JMS connection factory.
const (
	propClientProvider  encoding.Symbol = "com.microsoft:is-client-provider"
	propQueueAutoDelete encoding.Symbol = "com.microsoft:queue-auto-delete-on-idle-duration-in-seconds"
	propTopicAutoDelete encoding.Symbol = "com.microsoft:topic-auto-delete-on-idle-duration-in-seconds"
	capQueue            encoding.Symbol = "queue"
)

// jmsProvider is what a JMS client's open asked for.
type jmsProvider struct {
	queueAutoDelete time.Duration // 0: none
	topicAutoDelete time.Duration
}

// jmsProviderOf returns the settings of an open's properties, nil unless
// they mark a Service Bus JMS client.
func jmsProviderOf(props encoding.Map) *jmsProvider {
	if v, ok := props.GetSymbol(propClientProvider); !ok || v != true {
		return nil
	}
	p := &jmsProvider{}
	seconds := func(k encoding.Symbol) time.Duration {
		v, _ := props.GetSymbol(k)
		n, ok := asInt64(v)
		if !ok || n <= 0 {
			return 0
		}
		// Service Bus's minimum is 5 minutes; nothing is longer than a
		// time.Duration.
		return max(time.Duration(min(n, math.MaxInt64/int64(time.Second)))*time.Second, core.MinAutoDeleteOnIdle)
	}
	p.queueAutoDelete, p.topicAutoDelete = seconds(propQueueAutoDelete), seconds(propTopicAutoDelete)
	return p
}

// jmsAutoCreate reports whether the attach of l, refused with e, is one
// to make a queue or topic for, and which.
func (c *conn) jmsAutoCreate(l *link, a *frames.Attach, e *frames.Error) (core.EntityKind, bool) {
	if c.jmsProvider == nil || e.Condition != frames.CondNotFound || core.ParseAddress(l.entity).Sub != "" || core.ParseAddress(l.entity).DeadLetter {
		return 0, false
	}
	var caps []encoding.Symbol
	if l.in != nil && a.Target != nil {
		caps = a.Target.Capabilities
	} else if l.out != nil && a.Source != nil {
		caps = a.Source.Capabilities
	}
	switch {
	case hasCapability(caps, capQueue):
		return core.KindQueue, true
	case hasCapability(caps, capTopic):
		return core.KindTopic, true
	}
	return 0, false
}

// autoCreate makes the queue or topic l is attached to, in a helper
// goroutine, then completes the attach.
func (l *link) autoCreate(a *frames.Attach, kind core.EntityKind) {
	c := l.s.c
	if !c.auth.allows(l.entity, sas.Manage) {
		l.refuse(a, errorf(frames.CondUnauthorizedAccess,
			"Unauthorized access. 'Manage' claim(s) are required to create the %s '%s' for a JMS client. Resource: '%s'.", kind, l.entity, l.entity))
		return
	}
	e := core.Entity{Kind: kind, Name: l.entity, AutoDeleteOnIdle: c.jmsProvider.queueAutoDelete}
	if kind == core.KindTopic {
		e.AutoDeleteOnIdle = c.jmsProvider.topicAutoDelete
	}
	c.goWork(func() {
		_, err := c.broker().CreateEntity(c.ctx, e)
		if core.CodeOf(err) == core.CodeEntityExists {
			err = nil // made meanwhile, by another client
		}
		c.post(func() {
			if l.detached || !l.s.live() {
				return
			}
			if err != nil {
				l.refuse(a, amqpError(err))
				return
			}
			l.attachEntity(a)
		})
	})
}
