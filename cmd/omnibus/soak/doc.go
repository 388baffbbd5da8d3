// Package soak is omnibus's crash soak, run as `omnibus-tools soak` (make soak):
// it puts the real broker binary under load and kills it with SIGKILL at
// random moments, restarting it each time on the same data directory and
// address, then drains the queue and accounts for every message.
//
// Senders and peek-lock receivers are go-amqp clients with their own
// reconnection: a connection that fails is replaced, on the same address,
// as soon as the broker accepts connections again. Every message carries
// the run id and a sequence number ([bench.Stamp]), and a [bench.Ledger]
// records each send and its acknowledgement, each delivery, and each
// completion with what the broker answered: receivers settle in
// receiver-settle-mode second (as the Azure SDKs do), so a completion is
// confirmed only when the broker's disposition comes back.
//
// The accounting ([Result]) must show, for the run to pass:
//   - acknowledged but never received: 0 (loss);
//   - completed then delivered again: 0 (a completion the broker
//     confirmed must never be undone, not even by a crash);
//   - received but never sent: 0 (ghosts: messages nobody sent, or of a
//     sequence number never handed to a sender);
//   - delivered again with nothing to explain it: 0;
//   - received, then gone without a completion: 0. A message delivered
//     and never confirmed completed must come back, unless a completion
//     of it was under way at a kill and the broker applied it without the
//     answer getting through; the soak counts the completions under way
//     at each kill, and more messages gone in silence than that means a
//     message was lost after its delivery.
//
// Sends that failed or went unanswered because of a kill may or may not
// have been stored; they are not counted as lost, and when they arrive
// they are counted apart. A completion whose answer was lost in a kill may
// or may not have been applied: the message may come back, and is counted
// apart too (allowed). Recovery is measured per restart, from starting the
// process to the first AMQP connection it accepts (a prober's, polling
// every 2 ms, or a client's) and to the first send acknowledged after it;
// it is reported, not asserted.
//
// With DiskFaults some of the restarts follow a failing disk instead of a
// kill: every fsync of the broker's write-ahead log fails from a moment
// under load on (SIGUSR1 to a broker started with --fail-fsync-on-sigusr1).
// Every send in flight then must be answered (stored, the outcome unknown
// as com.microsoft:timeout, or refused as server-busy), and SIGTERM must
// end the broker within 5 s with exit status 1; the accounting is the
// same, a send or completion of unknown outcome counted as one a kill
// left unanswered.
//
// With Subscriptions the soak loads a topic instead: every subscription
// is a stream of the ledger that must receive and complete each message.
package soak
