// Package trace is Switchyard's distributed tracing: an OpenTelemetry
// TracerProvider with OTLP export (off by default), W3C trace context
// carried from the client (HTTP headers or MCP params._meta, SEP-414)
// across NATS message headers to every hop, and one span per hop:
//
//   - edge: a SERVER span "{mcp.method.name} {target}" (OpenTelemetry
//     semantic conventions for MCP), started by [Provider.StartEdge];
//   - router: an INTERNAL span "route {mcp.method.name}", started by
//     [Provider.StartRoute] from the route message's headers;
//   - upstream-worker: a CLIENT span "{mcp.method.name} {target}" for the
//     call to the upstream, started by [Provider.StartUpstream] from the
//     forwarded message's headers.
//
// Each hop passes its span on with [Inject] into the headers of the NATS
// message it publishes; the next hop continues it. docs/tracing.md has the
// configuration, the attributes and the wiring guide.
//
// # Cost when off
//
// A nil *Provider, or one built from a Config with Enabled false, is off:
// Start* return the context unchanged and a zero [Span] whose methods do
// nothing, [Inject] leaves a header untouched when the context holds no
// span, and nothing allocates (BenchmarkOff* in bench_test.go).
//
// # Concurrency
//
// A Provider and the package functions are safe for concurrent use. A
// [Span] belongs to the goroutine that handles its call, like the
// OpenTelemetry span it wraps (whose methods are themselves safe).
//
// # What is never recorded
//
// Session ids (mcp.session.id), tool arguments and results, Authorization
// headers and API keys are never span attributes.
package trace
