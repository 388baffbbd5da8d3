// Package conformance is a black-box suite that tells, scenario by
// scenario, whether an endpoint behaves like Azure Service Bus. It is a
// product, not omnibus's unit tests: the same scenarios run against
// omnibus, Microsoft's emulator or a real namespace, given a connection
// string (and, for REST scenarios, the HTTP base URL).
//
// Each [Scenario] names the seed document and the sentence it checks, the
// protocol it uses, and a body that drives real clients — the official Go
// SDK (azservicebus), go-amqp for wire-level details, net/http for REST —
// through a [T]. Scenarios ask for entities by profile ([Profiles]): a
// fresh entity created and deleted through the management API, or, with
// [Target.Predeclared], the entity of the Config.json shipped beside this
// file, which [EmulatorConfig] generates from the same profile table.
//
// [Run] executes a selection and returns a [Report] that formats as a
// table (text or markdown) or JSON, closing with "N passed, N failed, N
// skipped". The omnibus-tools command exposes it as `omnibus-tools conformance`.
package conformance
