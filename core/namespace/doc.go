// Package namespace runs several Service Bus namespaces in one omnibus
// over one store.
//
// A namespace is a [core.Broker] of its own over its own key range of the
// store (storage/prefixstore), so isolation is structural: entities,
// messages, sessions and transactions of one namespace live in keys the
// others cannot name, and a namespace is dropped with everything in it by
// one synced DeletePrefix. The first (default) namespace keeps the
// unprefixed keys omnibus has always used, so a data directory written
// before namespaces existed opens unchanged as the default namespace.
// Since everything is in the store, a cluster (storage/raftstore)
// replicates namespaces like any other state. A cluster with data groups
// keeps the records elsewhere (its meta group) and the namespaces' data
// in its groups: a registry given a [Shared] changes its records through
// it and follows it with [Registry.Sync] (shared.go).
//
// Key layout, beside the default namespace's core tables (upper-case
// tags, core/keys.go):
//
//	'c'              → the next namespace id (uint64), never reused
//	'd'              → the default namespace's record (JSON)
//	'n' name         → a namespace's record (JSON): id, rules, test clock
//	'p' id:8 ...     → that namespace's core keys
//
// A [Registry] owns the namespaces: it opens them at start, creates and
// deletes them at run time and tells the fronts which namespace a client
// reaches. A client names its namespace by the host it connects to
// ([Registry.ForHost]: the first label, so "sales.localhost" and
// "sales.servicebus.windows.net" both reach "sales"), or by its SAS key
// name ([Registry.ForKeyName]): "rule@sales", the namespace's own name
// (as AlmostServiceBus does), or a rule name only one namespace defines.
// Anything else (localhost, an IP address, an unknown name) reaches the
// default namespace, so existing connection strings keep working.
//
// Each namespace checks tokens against its own shared access
// authorization rules (the namespace's, or the root rules it inherits
// when it has none) and those of the queue or topic a path lies in
// ([Namespace.Validate]). With the test clock on, each namespace runs on
// a [clock.Offset] that [Registry.AdvanceClock] moves forward.
package namespace
