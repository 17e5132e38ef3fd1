// Package router is Switchyard's routing role.
//
// A router consumes calls from edges on switchyard.v1.route.<tenant>.<op>
// (queue group "router"), resolves the tenant's view, and either answers
// itself (tools/list, prompts/list, resources/list and
// resources/templates/list, from an immutable snapshot) or forwards the
// call to one worker on switchyard.v1.worker.<worker>.<op> with the edge's
// reply subject, so the worker answers the edge directly.
//
// # Routing
//
// In a passthrough view (/mcp/<upstream>) every call goes to that upstream.
// In the federated view, tools/call and prompts/get are routed by their
// federated name (<upstream>__<name>, mapped back to the upstream's own);
// resources/read, subscribe and unsubscribe by URI (URIs are not renamed):
// the upstream listing that resource, else the first whose resource
// template matches it, else the only upstream with resources at all; an
// unmatched URI is -32602 "Resource not found" (SEP-2164). completion/complete follows
// its reference (a prompt by name, a resource template by URI template).
// logging/setLevel goes to every upstream that is up; the router answers
// once all of them have.
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
// switchyard_lists (every upstream's tools, prompts, resources and resource
// templates, written by workers); worker heartbeats on
// switchyard.v1.evt.worker.*. When a list changes the router publishes
// proto.ListChanged (one per list kind) on
// switchyard.v1.evt.list_changed.<tenant>.
package router
