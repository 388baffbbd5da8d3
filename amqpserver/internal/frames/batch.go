package frames

import (
	"fmt"
	"unsafe"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// BatchFactor bounds what [SplitBatch] spends on the messages' own
// structures (Message, MessageHeader, MessageProperties and the slices
// holding them): at most BatchFactor bytes per byte of the batch's data
// sections, on top of what decoding the messages' values costs (at most
// [encoding.AllocFactor] per byte of each). The smallest message a batch
// can hold takes five bytes and costs about 240 bytes of structures; a
// batch of such messages is still within the bound, and one that is not
// fails with [encoding.ErrBudget].
const BatchFactor = 2 * encoding.AllocFactor

// Sizes charged against a batch's budget.
const (
	messageSize    = int(unsafe.Sizeof(Message{}))
	headerSize     = int(unsafe.Sizeof(MessageHeader{}))
	propertiesSize = int(unsafe.Sizeof(MessageProperties{}))
	sliceSize      = int(unsafe.Sizeof([]byte(nil)))
	pointerSize    = int(unsafe.Sizeof((*Message)(nil)))
)

// SplitBatch decodes the messages inside a Service Bus batch, a message
// sent with transfer message-format [MessageFormatBatch] whose data
// sections each hold one complete encoded message. Each is decoded as
// [UnmarshalMessageSharing] does, so the inner messages' bodies alias the
// batch's. It fails if the batch has no data body, any inner message is
// malformed, or the messages' structures exceed [BatchFactor].
func SplitBatch(batch *Message) ([]*Message, error) {
	if batch.BodyKind != BodyData && (batch.BodyKind != BodyNone || batch.Data == nil) {
		return nil, fmt.Errorf("%w: batch body is not data sections", ErrMalformed)
	}
	size := 0
	for _, d := range batch.Data {
		size += len(d) + 5 // a data section's descriptor and vbin header take 5 bytes at least
	}
	budget := BatchFactor * size
	// One allocation for all the messages: a batch holds many small ones.
	budget -= len(batch.Data) * (messageSize + pointerSize)
	if budget < 0 {
		return nil, fmt.Errorf("batch of %d messages in %d bytes: %w", len(batch.Data), size, encoding.ErrBudget)
	}
	msgs := make([]Message, len(batch.Data))
	out := make([]*Message, len(batch.Data))
	for i, d := range batch.Data {
		m := &msgs[i]
		if err := m.unmarshal(d, true, nil); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		if budget -= structCost(m); budget < 0 {
			return nil, fmt.Errorf("batch message %d: %w", i, encoding.ErrBudget)
		}
		out[i] = m
	}
	return out, nil
}

// structCost is what m's header, properties and body slices took to
// allocate, beyond the Message itself.
func structCost(m *Message) int {
	n := (cap(m.Data) + cap(m.Sequence)) * sliceSize
	if m.Header != nil {
		n += headerSize
	}
	if m.Properties != nil {
		n += propertiesSize
	}
	return n
}
