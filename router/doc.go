// Package router is Switchyard's routing role.
//
// A router consumes calls from edges on switchyard.v1.route.<tenant>.<op>
// (queue group "router"), resolves the tenant's view of the tools, and
// either answers itself (tools/list, from an immutable snapshot) or
// forwards the call to one worker on switchyard.v1.worker.<worker>.<op>
// with the edge's reply subject, so the worker answers the edge directly.
// Before forwarding it sends the edge a placement note (header Sy-Placed)
// naming the worker, so the edge can fail the call at once if that worker
// goes away and knows where to send a cancellation.
//
// # Placement
//
// Calls of a 2025-era client session go to the worker chosen by
// rendezvous hashing of (edge, session, upstream) over the live workers on
// which the upstream is up: every router replica computes the same choice
// from the same presence view, and when a worker leaves only the pairs it
// owned move. Stateless (2026-era) calls go round-robin over the same set.
// No live worker for an upstream gives proto.CodeNoWorkers at once; workers
// that serve it but report it down give proto.CodeUpstreamUnavailable.
//
// # Sources
//
// KV buckets switchyard_upstreams (the catalog, owned by tenancy-svc) and
// switchyard_tools (tool sets written by workers); worker heartbeats on
// switchyard.v1.evt.worker.*. When a view changes the router publishes
// proto.ToolsChanged on switchyard.v1.evt.tools_changed.<tenant>.
package router
