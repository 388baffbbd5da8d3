// Package frames encodes and decodes AMQP 1.0 frames (OASIS AMQP 1.0
// part 2, §2.3 and §2.7; part 5, §5.3 for SASL) and messages (part 3, §3.2).
//
// It is a pure codec: it knows nothing about connections, sessions or
// links. A server typically:
//
//  1. reads the 8-byte protocol header with [Reader.ReadProtocolHeader] and
//     answers with [WriteProtocolHeader] ([SASLHeader] first, then
//     [AMQPHeader]);
//  2. loops on [Reader.ReadFrame], which returns a [Frame] whose Body is one
//     of the performative types ([*Open], [*Begin], [*Attach], [*Flow],
//     [*Transfer], [*Disposition], [*Detach], [*End], [*Close]) or SASL
//     types ([*SASLMechanisms], [*SASLInit], [*SASLChallenge],
//     [*SASLResponse], [*SASLOutcome]), or nil for an empty (heartbeat)
//     frame;
//  3. writes frames with [Write] into a buffer it then flushes to the
//     socket;
//  4. decodes transfer payloads with [UnmarshalMessage] and encodes outgoing
//     messages with [Message.Marshal].
//
// Errors from [Reader.ReadFrame] tell the server how to close: a frame
// above the negotiated maximum is [ErrFrameTooLarge] (close with
// amqp:connection:framing-error or amqp:frame-size-too-small as
// appropriate), a frame too short to hold its own header is
// [ErrFrameTooSmall], and anything undecodable, including a missing
// mandatory field, wraps [ErrMalformed] (amqp:decode-error).
//
// Field conventions: optional fields with no natural zero (settle modes,
// delivery-id, link-credit, …) are pointers, nil meaning absent. Optional
// strings, symbols, binaries, maps and symbol lists use their zero value
// for absent. Fields with a non-zero spec default (max-frame-size,
// channel-max, handle-max, priority) are filled with that default when
// decoded and omitted from the encoding when they hold it.
package frames
