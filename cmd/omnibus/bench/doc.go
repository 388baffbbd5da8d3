// Package bench is omnibus's load generator, run as `omnibus-tools bench`. It
// drives any AMQP 1.0 endpoint with go-amqp — omnibus, RabbitMQ, Service
// Bus — or, for the Service Bus-specific scenarios (sessions, topic
// fan-out), omnibus through the official azservicebus SDK, or omnibus's
// REST gateway with net/http.
//
// Scenarios ([Config].Scenario): send (unsettled with N in flight per
// link, or presettled), receive (pre-fill, then peek-lock + accept with
// link credit, or receive-and-delete), both (send and receive at once,
// end-to-end latency from a timestamp the message carries), sessions,
// fanout, rest, drain (empty a queue of whatever it holds, counting it),
// and pipeline (receive, then complete + send a result, with --txn in one
// transaction: the exactly-once step).
//
// A run verifies what it measures: every message carries the run id, a
// unique sequence number and its send time as application properties,
// and a [Ledger] accounts for every send, acknowledgement and delivery.
// Loss, unexplained duplicates, per-session disorder or failed
// operations make [Result.Err] non-nil and the command exit non-zero.
//
// Output: a progress line per second, a final table ([Result.WriteTable]),
// a JSON record ([Result.WriteJSON]) and a plot of throughput over time
// and the latency distribution ([Result.WritePlot]).
//
// compare.sh beside this file runs the same scenarios against omnibus and
// RabbitMQ (make compare).
package bench
