// Package amqpserver is omnibus's AMQP 1.0 front: a TCP listener that
// speaks the Service Bus dialect of AMQP (shared/spec/amqp.md) to the
// official SDKs and to plain AMQP clients, translating links into calls
// on [core.Broker].
//
// # Connection
//
// A connection negotiates SASL (header 3), then AMQP (header 0), then
// exchanges open frames (handshake.go). SASL offers ANONYMOUS, after
// which the client must put a token on $cbs for an entity before
// attaching to it, and PLAIN, where the user name is a key name and the
// password its key, giving that rule's rights on every entity (sasl.go,
// auth.go, cbs.go). A client that skips SASL is refused unless the server
// runs without a validator.
//
// A connection's sessions, links and delivery maps are changed in
// passes, one at a time under the connection's mutex (conn.go), each
// ending with a flush: the sends and the settlements of the pass go to
// the broker together (one store write per burst, which is what keeps
// the AMQP front about as cheap as calling the core directly; a link's
// sends and the connection's completions wait while the previous ones
// are in flight, so a burst is what arrived during a commit, whichever
// goroutine makes the passes: link.hold, completeMany), its
// acknowledgements become dispositions over ranges of delivery ids, and
// its frames leave in one write. Three goroutines serve a connection,
// and whichever has work makes the pass itself rather than handing it
// over:
//
//   - the reader decodes frames and handles them: each pass takes the
//     frame read and every whole frame buffered behind it (the read
//     buffer grows from 4 to 64 KiB while reads fill it), so a read that
//     brought a burst is one pass;
//   - blocking work — core sends, receives and settlements,
//     AcceptSession, management calls — runs in helper goroutines that
//     report back with conn.post (inbox.go); the helpers of sends,
//     completions and receives make the pass for their answer
//     themselves when no other pass is running (postHere);
//   - run, the connection goroutine, makes the passes nobody else does:
//     work posted while another pass ran, heartbeats, lifetime,
//     shutdown, the reader's end.
//
// No pass waits on storage, and none writes to the socket: output goes
// to the writer (writer.go: one write per wake-up for everything queued
// meanwhile). So a pipelined send crosses two goroutines of ours: the
// reader hands it to the broker, and the helper that learns it is
// durable hands its disposition to the writer; the rest of its hand-offs
// are the store's (cmd/omnibus/bench/RESULTS.md, "hand-offs").
//
// Frames still take effect in the order they arrived: a detach, end or
// close first hands the pass's queued sends and settlements to the
// broker, and what it releases (a message session) and its answer wait
// until every send and settlement before it has been answered (owed.go),
// so settlements a client writes together with a detach are never lost.
// Heartbeats go out at half the peer's idle timeout; a peer silent for
// longer than ours is closed with amqp:resource-limit-exceeded.
//
// # Links
//
//   - Client senders (incoming.go): the server keeps generous credit
//     outstanding and hands each complete delivery (assembled across
//     frames, up to the entity's maximum size) to core.SendAsync, the
//     deliveries of one pass together, so pipelined deliveries are
//     committed in groups; while a link's previous send is in flight,
//     its new deliveries wait for it and go as one (link.hold), so the
//     groups are as large as the store's commit latency allows even
//     from a client that writes each transfer as it goes. Each is answered with accepted once durable or
//     rejected{error}; one that grows past the entity's maximum size is
//     rejected with amqp:link:message-size-exceeded at once and the rest
//     of its frames dropped unbuffered. The session incoming-window is
//     reopened only as far as the connection's incoming buffer
//     (Limits.MaxIncomingBuffer) has room, and unfinished deliveries
//     beyond it detach their link.
//   - Client receivers (outgoing.go, outqueue.go): rcv-settle-mode second
//     is peek-lock, first is receive-and-delete. One helper at a time runs
//     core.Receive for the link, taking no more than its credit, the room
//     left in the client's session incoming-window (in frames), the room
//     under the unsettled cap and the room in the connection's delivery
//     buffer (in bytes) allow: a message is locked only when its transfer
//     can be written now. One that no longer fits when the receive returns
//     is released, no delivery counted. Receive-and-delete takes messages
//     peek-locked, reserves their window room and removes them (durably)
//     before sending them, so it never removes more than it can write at
//     once. Transfers are written frame by frame while the bytes waiting
//     for the socket stay under 2 MiB. The delivery tag is the lock token
//     in .NET GUID byte order. Drain uses up the credit and answers
//     flow(drain=true, link-credit=0). Credit is an unsigned 32-bit number
//     (§2.6.7, serial-number arithmetic).
//   - Client dispositions (disposition.go, complete.go) become core
//     outcomes — the accepts of one pass one core.CompleteMany, the other
//     outcomes applied in order by one helper, the link pulling no more
//     until they are — and are answered with a settled disposition
//     carrying the final state or rejected{com.microsoft:message-lock-lost}.
//   - Session receivers (sessionfilter.go) accept a session through
//     com.microsoft:session-filter and echo it in the client's encoding;
//     the server keeps a registry of held session locks for $management.
//   - $cbs and <entity>/$management (cbs.go, rpc.go, mgmt*.go) are
//     request/response nodes; replies are routed by reply-to.
//
// Every core error becomes an AMQP condition through one table
// (errors.go).
//
// # Limits
//
// Limits (limits.go) bounds what an open connection holds: sessions and
// links (advertised as channel-max and handle-max; beyond them
// amqp:connection:framing-error, and beyond the links of a connection
// Service Bus's amqp:resource-limit-exceeded), handles of links we
// detached awaiting the client's detach (the link itself is dropped at
// once), unsettled deliveries per receiving link, replies waiting per
// reply link, bytes taken for clients and not yet written, and bytes of
// incoming deliveries not yet answered.
//
// # Decisions
//
//   - A client that opens with the AMQP header instead of SASL gets the
//     SASL header back and is disconnected (AMQP §2.2), unless the server
//     has no validator.
//   - rcv-settle-mode first with an explicit snd-settle-mode unsettled is
//     peek-lock settled by the client in one step (plain AMQP clients);
//     every other first-mode receiver is receive-and-delete.
//   - Attaching to <entity>/$management needs any right on it; each
//     operation then checks the right it needs.
//   - A put-token grant lasts until the token's expiry plus the
//     validator's clock skew (the time an expired token is still
//     accepted). A link attached on grants is detached with
//     amqp:unauthorized-access once the connection no longer holds the
//     right it was attached with, so a token renewed before it lapses
//     keeps its links (lifetime.go). A connection whose tokens all
//     lapsed keeps its session and $cbs links and may put a new token:
//     the 20 s deadline applies only until the first credential.
//   - Until it presents a credential (a SASL PLAIN login or a valid
//     put-token), a connection may send frames up to
//     Config.PreAuthMaxFrameSize, hold Config.PreAuthMaxLinks sessions and
//     links, and attach only to $cbs; it is closed with
//     amqp:unauthorized-access Config.AuthTimeout (20 s, as Service Bus)
//     after accept. Put-token requests are capped at
//     Config.MaxCBSMessageSize and rejected with
//     amqp:link:message-size-exceeded above it.
//   - Rights are checked before an entity is looked up, at attach and at
//     put-token (401 for a bad token whether or not the entity exists):
//     a peer without a key learns nothing about which entities exist.
//   - MaxConnections (default 5,000, Service Bus's quota) and
//     MaxPendingConnections are checked at accept, and Config.Admit is
//     asked there; a refused peer gets SASL (accepted without looking),
//     our open and a close saying why: amqp:resource-limit-exceeded for
//     the caps, amqp:unauthorized-access for Admit (admit.go).
//   - A failed accept never ends Serve: it is retried with a back-off
//     (listener.go), and Server.Health reports the listener meanwhile.
//   - Shutdown drains (drain.go): a connection stops reading, handles the
//     frames already read, writes every answer owed (owed.go), then
//     closes with amqp:connection:forced; stored sends are never left
//     unanswered.
//   - Frames above our max-frame-size close the connection with
//     amqp:frame-size-too-small, undecodable frames with amqp:decode-error,
//     a peer silent past our idle timeout with
//     amqp:resource-limit-exceeded.
package amqpserver
