package amqpserver

import (
	"errors"
	"fmt"
)

// Defaults for the zero values of [Limits]. The link and session counts
// are Service Bus's: it refuses the 5,000th handle of a connection with
// amqp:resource-limit-exceeded ("Cannot allocate more handles ... The
// maximum number of handles allowed is 4999"), and allows 5,000
// concurrent receives on an entity, which is also the most credit the Go
// SDK grants in one call.
const (
	DefaultMaxSessionsPerConnection = 4999
	DefaultMaxLinksPerSession       = 4999
	DefaultMaxLinksPerConnection    = 4999
	DefaultMaxUnsettledPerLink      = 5000
	DefaultMaxQueuedReplies         = 1000
	DefaultMaxDeliveryBuffer        = 16 << 20
	DefaultMaxIncomingBuffer        = 256 << 20
	DefaultMaxTransactions          = 1000
	DefaultMaxTransactionBytes      = 256 << 20
)

// Limits bounds what one AMQP connection can make the server hold once it
// is open. Each bound is advertised where AMQP lets the server say it
// (channel-max, handle-max), so a well-behaved client never meets it; a
// client that goes beyond gets the condition in cmd/omnibus/README.md's Limits section.
// The zero value of each field means its default.
type Limits struct {
	// MaxSessionsPerConnection caps the sessions a connection may begin:
	// the open frame's channel-max is one less. Default
	// [DefaultMaxSessionsPerConnection], at most 65536.
	MaxSessionsPerConnection int
	// MaxLinksPerSession caps the links of one session: the begin
	// frame's handle-max is one less. Default [DefaultMaxLinksPerSession].
	MaxLinksPerSession int
	// MaxLinksPerConnection caps the links attached on a connection
	// across its sessions, counting links we detached whose detach the
	// client has not answered yet. Default
	// [DefaultMaxLinksPerConnection].
	MaxLinksPerConnection int
	// MaxUnsettledPerLink caps the peek-locked deliveries one receiving
	// link holds unsettled: beyond it the link waits for settlements
	// whatever its credit. Default [DefaultMaxUnsettledPerLink].
	MaxUnsettledPerLink int
	// MaxQueuedReplies caps the $cbs and $management replies waiting for
	// credit on one reply link; requests beyond it are rejected with
	// amqp:resource-limit-exceeded. Default [DefaultMaxQueuedReplies].
	MaxQueuedReplies int
	// MaxDeliveryBuffer caps the bytes of messages a connection has
	// taken from its entities and not yet written to the socket; one
	// message larger than it still goes out alone. Default
	// [DefaultMaxDeliveryBuffer].
	MaxDeliveryBuffer int
	// MaxIncomingBuffer caps the bytes of incoming deliveries a
	// connection holds: read, and not yet stored and answered. The
	// session incoming-window is opened only as far as what is left of
	// it allows (in frames of the server's max-frame-size), and
	// unfinished deliveries beyond it (never fewer than one message of
	// the largest size) detach their link with
	// amqp:resource-limit-exceeded. Default [DefaultMaxIncomingBuffer].
	MaxIncomingBuffer int
	// MaxTransactionsPerConnection caps the transactions a connection
	// holds declared and not discharged; a declare beyond it is rejected
	// with amqp:resource-limit-exceeded. Default [DefaultMaxTransactions].
	MaxTransactionsPerConnection int
	// MaxTransactionBytes caps the bytes of messages a connection's open
	// transactions hold to store when they commit (never less than one
	// message of the largest size); a transactional transfer beyond it is
	// rejected with amqp:resource-limit-exceeded. Default
	// [DefaultMaxTransactionBytes].
	MaxTransactionBytes int
}

// setDefaults fills zero fields and checks the others.
func (l *Limits) setDefaults() error {
	for _, f := range []struct {
		p    *int
		def  int
		max  int
		name string
	}{
		{&l.MaxSessionsPerConnection, DefaultMaxSessionsPerConnection, 1 << 16, "MaxSessionsPerConnection"},
		{&l.MaxLinksPerSession, DefaultMaxLinksPerSession, 1 << 32, "MaxLinksPerSession"},
		{&l.MaxLinksPerConnection, DefaultMaxLinksPerConnection, 1 << 32, "MaxLinksPerConnection"},
		{&l.MaxUnsettledPerLink, DefaultMaxUnsettledPerLink, 1 << 31, "MaxUnsettledPerLink"},
		{&l.MaxQueuedReplies, DefaultMaxQueuedReplies, 1 << 31, "MaxQueuedReplies"},
		{&l.MaxDeliveryBuffer, DefaultMaxDeliveryBuffer, 1 << 40, "MaxDeliveryBuffer"},
		{&l.MaxIncomingBuffer, DefaultMaxIncomingBuffer, 1 << 40, "MaxIncomingBuffer"},
		{&l.MaxTransactionsPerConnection, DefaultMaxTransactions, 1 << 31, "MaxTransactionsPerConnection"},
		{&l.MaxTransactionBytes, DefaultMaxTransactionBytes, 1 << 40, "MaxTransactionBytes"},
	} {
		switch {
		case *f.p < 0:
			return fmt.Errorf("amqpserver: Limits.%s is negative", f.name)
		case *f.p == 0:
			*f.p = f.def
		case *f.p > f.max:
			return fmt.Errorf("amqpserver: Limits.%s is above %d", f.name, f.max)
		}
	}
	if l.MaxDeliveryBuffer < minDeliveryBuffer {
		return errors.New("amqpserver: Limits.MaxDeliveryBuffer is below 64 KiB")
	}
	return nil
}

// minDeliveryBuffer is the smallest MaxDeliveryBuffer accepted.
const minDeliveryBuffer = 64 << 10

// channelMax is the highest channel a client may begin a session on.
func (l *Limits) channelMax() uint16 { return uint16(l.MaxSessionsPerConnection - 1) }

// handleMax is the highest handle a client may attach a link with.
func (l *Limits) handleMax() uint32 { return uint32(l.MaxLinksPerSession - 1) }
