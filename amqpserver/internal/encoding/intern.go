package encoding

// Symbols are names from small vocabularies: most that a broker decodes
// are annotation keys, capabilities, filter names and SASL mechanisms that
// every client sends again and again. The decoder returns a shared copy of
// these instead of allocating a string (and an interface box) for each;
// any other symbol is allocated as usual.

// internedSymbol is a well-known symbol, also boxed, so that neither the
// string nor the interface value costs an allocation.
type internedSymbol struct {
	sym   Symbol
	boxed any
}

// wellKnownSymbols maps the bytes of a well-known symbol to its shared
// copy. The map is never written after init.
var wellKnownSymbols = func() map[string]internedSymbol {
	names := []Symbol{
		// SASL mechanisms.
		"ANONYMOUS", "PLAIN", "EXTERNAL", "MSSBCBS",
		// Service Bus message annotations.
		"x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until", "x-opt-lock-token",
		"x-opt-partition-key", "x-opt-via-partition-key", "x-opt-scheduled-enqueue-time",
		"x-opt-message-state", "x-opt-deadletter-source", "x-opt-enqueue-sequence-number", "x-opt-deferred",
		// Link and connection properties, capabilities and filters the SDKs send.
		"com.microsoft:session-filter", "com.microsoft:timeout", "com.microsoft:tracking-id",
		"com.microsoft:entity-type", "com.microsoft:client-version", "com.microsoft:timespan",
		"com.microsoft:max-message-batch-size", "com.microsoft:correlation-filter:list",
		"com.microsoft:sql-filter:string", "apache.org:selector-filter:string",
		"product", "version", "platform", "framework", "user-agent",
		// Outcomes.
		"amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list",
	}
	m := make(map[string]internedSymbol, len(names))
	for _, s := range names {
		m[string(s)] = internedSymbol{sym: s, boxed: s}
		symbolFilter[len(s)] |= 1 << (s[len(s)-1] & 63)
	}
	return m
}()

// symbolFilter has, for each length below 64, a bit for the last byte
// (modulo 64) of every well-known symbol of that length: most other
// symbols are told apart without hashing them.
var symbolFilter [64]uint64

// lookupSymbol returns the shared copy of the symbol whose bytes are p, if
// it is a well-known one. The lookup itself does not allocate.
func lookupSymbol(p []byte) (internedSymbol, bool) {
	if len(p) == 0 || len(p) >= len(symbolFilter) || symbolFilter[len(p)]&(1<<(p[len(p)-1]&63)) == 0 {
		return internedSymbol{}, false
	}
	s, ok := wellKnownSymbols[string(p)]
	return s, ok
}
