// Package proto is Switchyard's wire contract: NATS subject names and
// builders, the msgpack envelopes that travel on them, header names, wire
// error codes and log keys.
//
// MCP params and results are never re-modelled here: they travel as raw JSON
// bytes inside the envelopes ([Request.Params], [Reply.Result]).
//
// # Subjects
//
//	switchyard.v1.route.<tenant>.<op>      edge -> router, request/reply, queue group "router"
//	switchyard.v1.router.<router>.<tenant>.<op>  edge -> one router by name (the edge knows the live ones)
//	switchyard.v1.evt.router.<router>      router heartbeats and Bye (RouterHeartbeat)
//	switchyard.v1.worker.<worker>.<op>     router -> one worker (pinned calls), reply to the edge
//	switchyard.v1.grant.<worker>.tools_call edge -> one worker on a route grant ([Request.Grant]: the router's MAC)
//	switchyard.v1.pool.<upstream>.<op>     any worker serving <upstream>, queue group "pool.<upstream>"
//	switchyard.v1.evt.worker.<worker>      worker presence heartbeats (and a goodbye)
//	switchyard.v1.evt.presence             "announce yourselves" query to every worker
//	switchyard.v1.evt.list_changed.<t>     a list of tenant t's view changed (body: ListChanged)
//	switchyard.v1.evt.session_closed.<e>   a client session on edge e ended
//	switchyard.v1.evt.routes               a router's route grants are void (empty body)
//	switchyard.v1.edge.<e>.msg             worker -> edge: upstream messages for a client session, outside calls
//	switchyard.v1.tenancy.admin.>          admin -> tenancy-svc: tenants and API keys (JSON)
//	switchyard.v1.tenancy.resolve.>        admin -> tenancy-svc: key, principal and access lookups
//	switchyard.v1.audit.<t>.<u>.<o>.<n>    edge -> the audit stream
//	switchyard.v1.bench.>                  the bench's own traffic
//
// Who may publish and subscribe to each, and to every bucket and stream,
// is [AccessTable]: the permission table every identity's NATS
// credentials carry (docs/security.md). Replies go to the requester's own
// inbox, _INBOX.<identity>. ([Identity.InboxPrefix]).
//
// <op> is the MCP method with "/" replaced by "_", lowercase (tools/call ->
// tools_call, logging/setLevel -> logging_setlevel).
//
// # Messages during a call
//
// Besides its reply, a call's reply subject receives the router's placement
// note ([HdrPlaced]), reply chunks ([HdrChunk]) and the upstream's
// notifications and requests for the client ([HdrMessage]), in the order
// the worker sent them.
//
// # Route grants
//
// A router that routes a tools/call may put a [RouteGrant] in its placement
// note: the edge then sends later calls of that tool in that view straight to
// a worker (switchyard.v1.grant.<worker>.tools_call, with the grant's token,
// the edge's own reply subject, so no-responders comes back to the edge),
// placing them as the
// router would ([RouteGrant] says how), until the edge's route cache TTL runs out or any
// router publishes on switchyard.v1.evt.routes.
//
// # KV buckets
//
//	switchyard_upstreams       key <upstream>: [UpstreamSpec], owned by tenancy-svc
//	switchyard_lists           key <upstream>.<kind>: [ListSet], written by workers
//	switchyard_tenants         key <tenant>: tenants and policy, owned by tenancy-svc
//	switchyard_apikeys         key <id>: API key records (hashes), owned by tenancy-svc
//	switchyard_tenancy_seeded  what tenancy-svc seeded from its config file
//	switchyard_keys            the fleet's secrets: [KeyTasks], [KeyGrants]
//	switchyard_edges           key <edge>: the live edges (limit shares)
//	switchyard_sessions        key <session id>: SessionRecord (any edge serves any session)
//
// tenancy-svc creates every bucket and the audit stream; no other role
// creates or changes one (internal/provision).
//
// Nothing in this package depends on nats.go, nats-server or the MCP SDK.
package proto
