// Package httpgw is omnibus's HTTP front: the Service Bus REST runtime API
// (send, send batch, peek-lock, receive-and-delete, unlock, complete, renew)
// and the ATOM management API (queues, topics, subscriptions, rules,
// namespace info), plus GET /health like the Service Bus emulator.
//
// A [Gateway] translates HTTP requests into calls on a [core.Broker]: it
// checks the SAS token of every request but /health against a
// [sas.Validator], decodes BrokerProperties and custom-property headers
// into a [core.Message], and maps core errors to HTTP statuses through one
// table (errors.go). Every route is listed in one function, routes, in
// gateway.go; the web console (package console: its page at /console and
// everything under /console/$assets/ and /console/$api/) is served in
// front of them, checking tokens per call itself.
//
// The wire contract is /work/shared/spec/rest.md: status codes (§0, §1.2),
// BrokerProperties (§2), custom property typing (§2.3), SAS (§3), ATOM
// (§4, through package internal/atom), errors (§5) and limits (§6).
//
// Every resource a peer can hold is bounded ([Config]): a request must
// arrive whole within ReadTimeout and its answer leave within WriteTimeout
// (plus the wait of a long poll); a keep-alive idle for IdleTimeout is
// closed; a body over its limit (the entity's maximum message size, 64 KiB
// for management) is refused from its Content-Length, or as soon as a
// chunked body passes the limit, before it is buffered; an answer sent
// before the body was read closes the connection instead of draining it;
// [Gateway.Listener] caps connections, making room by closing the one idle
// longest. Every route checks the SAS right Service Bus requires;
// rights_test.go walks the route table to prove it.
//
// Known departures from the service:
//   - Go's net/http canonicalises request header names, so a custom property
//     sent as "order-time" is stored as "Order-Time".
//   - The message id segment of …/messages/{id}/{lockToken} is not checked:
//     the lock token alone identifies the locked message.
//   - Messages whose body came over AMQP as amqp-value or amqp-sequence are
//     returned with their encoded body bytes.
package httpgw
