package frames

import (
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// TestCompositesWriteEveryField: every composite omnibus writes carries
// its definition's whole field count, absent fields as null, as Service
// Bus (Microsoft.Azure.Amqp) writes them. The Python SDK's pyamqp before
// azure-servicebus 7.15 reads fields by position (open's properties at
// 9, a transfer's payload after its 11 fields, Properties(*fields) for a
// message) and fails on shorter lists.
func TestCompositesWriteEveryField(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields int
		write  func(w *buffer.Buffer) error
	}{
		{"open", 10, (&Open{ContainerID: "c"}).MarshalAMQP},
		{"begin", 8, (&Begin{}).MarshalAMQP},
		{"attach", 14, (&Attach{Name: "l"}).MarshalAMQP},
		{"flow", 11, (&Flow{}).MarshalAMQP},
		{"transfer", 11, (&Transfer{}).MarshalAMQP},
		{"disposition", 6, (&Disposition{}).MarshalAMQP},
		{"detach", 3, (&Detach{}).MarshalAMQP},
		{"end", 1, (&End{}).MarshalAMQP},
		{"close", 1, (&Close{}).MarshalAMQP},
		{"error", 3, (&Error{Condition: "amqp:internal-error"}).MarshalAMQP},
		{"source", 11, (&Source{}).MarshalAMQP},
		{"target", 7, (&Target{}).MarshalAMQP},
		{"coordinator", 1, (&Coordinator{}).MarshalAMQP},
		{"received", 2, (&Received{}).MarshalAMQP},
		{"accepted", 0, (&Accepted{}).MarshalAMQP},
		{"rejected", 1, (&Rejected{}).MarshalAMQP},
		{"released", 0, (&Released{}).MarshalAMQP},
		{"modified", 3, (&Modified{}).MarshalAMQP},
		{"declared", 1, (&Declared{}).MarshalAMQP},
		{"transactional-state", 2, (&TransactionalState{}).MarshalAMQP},
		{"header", 5, func(w *buffer.Buffer) error { (&MessageHeader{Priority: DefaultPriority}).marshal(w); return nil }},
		{"properties", 13, (&MessageProperties{}).marshal},
		{"sasl-mechanisms", 1, (&SASLMechanisms{Mechanisms: []encoding.Symbol{"PLAIN"}}).MarshalAMQP},
		{"sasl-init", 3, (&SASLInit{Mechanism: "PLAIN"}).MarshalAMQP},
		{"sasl-outcome", 2, (&SASLOutcome{}).MarshalAMQP},
	} {
		var w buffer.Buffer
		if err := c.write(&w); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := encoding.ReadDescriptor(&w); err != nil {
			t.Fatalf("%s: descriptor: %v", c.name, err)
		}
		l, err := encoding.NewListReader(&w)
		if err != nil {
			t.Fatalf("%s: list: %v", c.name, err)
		}
		if got := l.Len(); got != c.fields {
			t.Errorf("%s: %d fields written, want %d", c.name, got, c.fields)
		}
	}
}
