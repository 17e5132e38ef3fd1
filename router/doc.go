// Package router is Switchyard's routing role.
//
// A router consumes calls from edges on switchyard.v1.route.<tenant>.<op>
// (queue group "router"), resolves the tenant's view, and either answers
// itself (tools/list, prompts/list, resources/list and
// resources/templates/list, from an immutable snapshot) or forwards the
// call to one worker on switchyard.v1.worker.<worker>.<op> with the edge's
// reply subject, so the worker answers the edge directly.
//
// # Tenants and policy
//
// The tenant of a call is the <tenant> token of its route subject; the
// edge puts there only a tenant it resolved. The router reads its tenancy
// snapshot once per call (Config.Tenancy, or a tenancy.Watcher of its
// own) and answers a tenant that is not in it with -32067
// (proto.CodeUnavailable) "tenant not available": a race with the
// tenant's deletion, or with this router catching up on a new tenant.
//
// Every method sees only what the tenant's policy (internal/policy)
// allows: the upstreams it sees, and of those the items its globs allow,
// matched on the federated name for tools and prompts (also in passthrough
// views), the URI for resources and the URI template for templates. A
// denied item is absent from every list and answered exactly as an item
// that does not exist; a passthrough view of an upstream the tenant does
// not see is an unknown upstream. Lists are filtered once per (tenant,
// policy, catalog snapshot) and their pages kept pre-encoded in a
// bounded cache; cursors name the last item returned and are bound to the
// tenant, list kind and view. docs/policy.md has the details.
//
// # Routing
//
// In a passthrough view (/mcp/<upstream>) every call goes to that
// upstream: tools/call and prompts/get only for names the view lists.
// In the federated view, tools/call and prompts/get are routed by their
// federated name (<upstream>__<name>, mapped back to the upstream's own);
// resources/read, subscribe and unsubscribe by URI (URIs are not renamed):
// the upstream listing that resource, else the first whose resource
// template matches it, else the only upstream with resources at all (of
// those the tenant sees); an unmatched URI is -32602 "Resource not found"
// (SEP-2164). completion/complete follows
// its reference (a prompt by name, a resource template by URI template).
// logging/setLevel goes to every upstream the tenant sees that is up; the
// router answers once all of them have.
// Before forwarding it sends the edge a placement note (header Sy-Placed)
// naming the worker, so the edge can fail the call at once if that worker
// goes away and knows where to send a cancellation.
//
// The client's Authorization (header Sy-Authorization of the route
// message) is copied onto the forwarded call only when the call's
// upstream has proto.UpstreamAuth.Passthrough in its spec; every other
// forwarded call, fan-outs included, goes without it.
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
// switchyard.v1.evt.worker.*; the tenancy buckets (switchyard_tenants,
// switchyard_apikeys) through a tenancy.Watcher unless Config.Tenancy is
// set. When a list a tenant sees changes (a catalog change, or the
// tenant's policy edited or the tenant added), the router publishes one
// proto.ListChanged per tenant and list kind on
// switchyard.v1.evt.list_changed.<tenant>, naming the upstreams whose
// items in that tenant's view changed. Every router replica publishes
// its own, so an edge may see an event more than once.
package router
