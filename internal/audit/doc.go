// Package audit records one audit event per MCP request in a JetStream
// stream and searches them.
//
// # Publishing
//
// The edge builds an [Event] per request and hands it to
// [Publisher.Record], which never blocks: events queue in a bounded
// buffer and [Publisher.Run] publishes them with asynchronous JetStream
// publishes. Events that cannot be published (buffer full, stream
// unavailable, no ack) are dropped and counted ([Stats]). Arguments and
// results are kept only for tenants that record them ([TenantPolicy]),
// passed through a field-path [Redactor] and scrubbed of secret shapes
// ([ScrubString]) before publishing; request headers are never part of
// an event.
//
// # Stream and subjects
//
// The stream (default SWITCHYARD_AUDIT, file storage, limits retention;
// [StreamConfig]) binds switchyard.v1.audit.> and each event goes to
//
//	switchyard.v1.audit.<tenant>.<upstream>.<outcome>.<name bucket>
//
// ([Subject]), so that searches by tenant, upstream, outcome and tool
// are subject filters.
//
// # Searching
//
// [Searcher] returns the newest events matching a [Query], a page at a
// time, walking the stream backwards from its last sequence in windows
// read with batched direct gets ($JS.API.DIRECT.GET.<stream>) filtered by
// subject; the fields the subject does not carry (principal, exact name,
// time) are filtered client-side. [NewHandler] serves it over HTTP
// (GET /audit/events) for the admin listener; `switchyard audit search`
// is its CLI.
package audit
