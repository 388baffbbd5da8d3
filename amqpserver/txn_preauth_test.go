package amqpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
)

// The Java SDK attaches its transaction coordinator without putting a
// token first (core-amqp's ReactorSession.getOrCreateTransactionCoordinator
// creates the link with requiresAuthorization false): with cross-entity
// transactions, or when createTransaction is a client's first call, the
// coordinator is the connection's first link and a declare may come
// before any token. Service Bus answers both; so does omnibus, counting
// the coordinator and its transactions toward PreAuthMaxLinks until the
// connection authenticates.
func TestTxnCoordinatorBeforeToken(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.PreAuthMaxLinks = 2 })
	p := &dotnetPeer{rawPeer: ts.rawDial(t), nextID: map[uint16]uint32{}}
	p.nc.SetDeadline(time.Now().Add(30 * time.Second))
	p.anonymousOpen()
	p.begin(0)
	if a := p.attachController(0, 0); a.Coordinator == nil {
		t.Fatalf("coordinator attach answered %+v, want it attached before any token", a)
	}
	first := p.declare(0, 0)
	p.declare(0, 0)
	id := p.transfer(0, 0, nil, &frames.Message{Value: encoding.Described{Descriptor: uint64(0x31), Value: []any{}}})
	rej, ok := p.answer(id).State.(*frames.Rejected)
	if !ok || rej.Error == nil || rej.Error.Condition != frames.CondResourceLimitExceeded ||
		!strings.Contains(rej.Error.Description, "token") {
		t.Fatalf("third declare before a token: %+v, want rejected with resource-limit-exceeded", rej)
	}
	if _, ok := p.discharge(0, 0, first, false).(*frames.Accepted); !ok {
		t.Fatal("discharge of an empty transaction not accepted")
	}
	p.declare(0, 0) // the discharge made room
	// Entity links still need a token.
	a := senderAttach("q")
	a.Handle = 1
	p.writeFrame(0, a)
	p.until(func(b frames.Body) bool { _, ok := b.(*frames.Attach); return ok })
	d, ok := p.until(func(b frames.Body) bool { _, ok := b.(*frames.Detach); return ok }).(*frames.Detach)
	if !ok || d.Error == nil || d.Error.Condition != frames.CondUnauthorizedAccess {
		t.Fatalf("sender attach before a token: detach %+v, want unauthorized-access", d)
	}
}
