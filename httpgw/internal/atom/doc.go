// Package atom encodes and decodes the ATOM/XML documents of the Service
// Bus management API, as the Go, JS and .NET administration clients send
// and parse them (rest.md §4, amqp.md §9).
//
// The description types ([QueueDescription], [TopicDescription],
// [SubscriptionDescription], [RuleDescription], [NamespaceInfo]) are plain
// Go values independent of the broker core; the HTTP gateway converts
// between them and the core's entities.
//
// Encoding is hand-written so that the bytes are exactly what clients
// expect: elements in the order .NET's DataContract readers and the
// recorded service responses use, the description namespace
// http://schemas.microsoft.com/netservices/2010/10/servicebus/connect as the
// default namespace, the XML Schema instance namespace under the prefix i
// (the JS client reads the literal attribute name "i:type"), and the
// CountDetails children in the 2011/06 namespace under the prefix d2p1.
//
// Decoding is lenient: namespaces are resolved, not matched by prefix;
// elements may come in any order; unknown elements are ignored; and missing
// elements take the Service Bus defaults ([DefaultQueueDescription] and
// friends), because an update is a full replacement in which omitted
// properties reset to their defaults.
//
// Durations are xs:duration ([FormatDuration], [ParseDuration]) with
// [MaxDuration] standing for .NET's TimeSpan.MaxValue. Timestamps are
// RFC 3339 in UTC with at most seven fractional digits (the precision of a
// .NET tick); decoded timestamps are truncated to that precision as well.
package atom
