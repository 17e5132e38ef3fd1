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
//	switchyard.v1.evt.list_changed.<t>    the router's view of tenant t changed
//	switchyard.v1.evt.session_closed.<e>   a client session on edge e ended
//
// <op> is the MCP method with "/" replaced by "_" (tools/call -> tools_call).
//
// # KV buckets
//
//	switchyard_upstreams   key <upstream>: [UpstreamSpec], owned by tenancy-svc
//	switchyard_lists       key <upstream>.<kind>: [ListSet], written by workers
//
// Nothing in this package depends on nats.go, nats-server or the MCP SDK.
package proto
