package core

// MaxHeaderSize is how many bytes a message's properties may take in all:
// its application properties, the message annotations the broker keeps
// for it and its system properties (ids, session ids, addresses, subject,
// content type, partition key). Service Bus allows 64 KB for "the entire
// header of the brokered message" and refuses a message beyond it as too
// large (AMQP amqp:link:message-size-exceeded), whatever the entity's
// maximum message size.
const MaxHeaderSize = 64 << 10

// HeaderSize is the size [MaxHeaderSize] bounds: the message's accounted
// size ([Message.Size]) without its body, plus its annotations.
func (m *Message) HeaderSize() int {
	n := m.Size() - len(m.Body)
	for k, v := range m.Annotations {
		n += len(k) + valueSize(v)
	}
	return n
}

// checkHeaderSize refuses a message whose properties take more than
// MaxHeaderSize bytes.
func checkHeaderSize(m *Message) error {
	if n := m.HeaderSize(); n > MaxHeaderSize {
		return errf(CodeMessageTooLarge, "The size quota of the message header (%d bytes) has been exceeded: its properties take %d bytes.",
			MaxHeaderSize, n)
	}
	return nil
}
