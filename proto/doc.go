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
//	switchyard.v1.worker.<worker>.<op>     router -> one worker (pinned calls), reply to the edge
//	switchyard.v1.pool.<upstream>.<op>     any worker serving <upstream>, queue group "pool.<upstream>"
//	switchyard.v1.evt.worker.<worker>      worker presence heartbeats (and a goodbye)
//	switchyard.v1.evt.presence             "announce yourselves" query to every worker
//	switchyard.v1.evt.list_changed.<t>     a list of tenant t's view changed (body: ListChanged)
//	switchyard.v1.evt.session_closed.<e>   a client session on edge e ended
//	switchyard.v1.evt.routes               a router's route grants are void (empty body)
//	switchyard.v1.edge.<e>.msg             worker -> edge: upstream messages for a client session, outside calls
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
// a worker (switchyard.v1.worker.<worker>.tools_call, the edge's own reply
// subject, so no-responders comes back to the edge), placing them as the
// router would ([RouteGrant] says how), until the edge's route cache TTL runs out or any
// router publishes on switchyard.v1.evt.routes.
//
// # KV buckets
//
//	switchyard_upstreams   key <upstream>: [UpstreamSpec], owned by tenancy-svc
//	switchyard_lists       key <upstream>.<kind>: [ListSet], written by workers
//
// Nothing in this package depends on nats.go, nats-server or the MCP SDK.
package proto
