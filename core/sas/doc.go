// Package sas implements Service Bus Shared Access Signatures: parsing and
// validating the tokens clients present ($cbs put-token over AMQP, the
// Authorization header over HTTP), minting tokens, checking SASL PLAIN
// key-name/key pairs, and parsing connection strings.
//
// A token looks like
//
//	SharedAccessSignature sr=<url-encoded resource>&sig=<url-encoded base64 HMAC>&se=<unix seconds>&skn=<key name>
//
// with the four fields in any order. The signature is
// base64(HMAC-SHA256(utf8(key), sr + "\n" + se)) where sr and se are taken
// exactly as they appear in the token: the SDKs encode the resource in
// different ways (upper- or lower-case hex escapes, the whole string
// lower-cased, with or without a query string), so the server cannot
// re-create the encoding and must sign what it received.
//
// The resource only limits where a token may be used: after decoding, its
// scheme, host, port and query are dropped and the remaining path, compared
// case-insensitively and segment by segment, must be a prefix of the entity
// path being accessed. An empty path covers the whole namespace. A local
// broker is reached under many host names (localhost, 127.0.0.1, a container
// alias), which is why the host takes no part in the check.
//
// [Validator] reports each failure as an [*Error] wrapping one of the
// sentinel errors ([ErrMissingToken], [ErrMalformedToken], [ErrUnknownKey],
// [ErrInvalidSignature], [ErrExpiredToken], [ErrInvalidAudience],
// [ErrInsufficientRights]). The HTTP gateway turns them into 401 bodies
// using [Error.Reason] and [Error.Detail]; the AMQP front turns them into
// amqp:unauthorized-access.
//
// The package is pure: it imports only the standard library and keeps no
// state besides the rules it is given.
package sas
