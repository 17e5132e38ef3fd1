// Package worker is Switchyard's upstream-worker role: it holds the
// sessions to upstream MCP servers, forwards the clients' requests through
// them with the upstream's raw result bytes, publishes each upstream's
// lists (tools, prompts, resources, resource templates), and announces
// itself with heartbeats.
//
// Build it with [New] and run it with [Service.Run]; [Service.Ready]
// reports readiness. Everything else is internal.
//
// # Subjects
//
// Consumed:
//
//	switchyard.v1.worker.<id>.tools_call      pinned call (proto.Request) -> proto.Reply
//	switchyard.v1.worker.<id>.<op>            any other forwarded method's op (proto.Forwarded: prompts_get,
//	                                          resources_read, logging_setlevel, ...; not tools_list, which
//	                                          routers answer): proto.Request whose Method maps to <op> -> proto.Reply
//	switchyard.v1.worker.<id>.cancel          proto.Cancel: cancel the edge's call (Edge, ID)
//	switchyard.v1.pool.<upstream>.catalog     queue group pool.<upstream>: refetch the list sets -> empty proto.Reply
//	switchyard.v1.pool.<upstream>.<op>        queue group pool.<upstream>: a call that needs no affinity
//	switchyard.v1.evt.presence                publish a heartbeat now
//	switchyard.v1.evt.session_closed.*        proto.SessionClosed: close that client session's upstream sessions
//
// Published:
//
//	switchyard.v1.evt.worker.<id>             proto.Heartbeat every HeartbeatInterval, on every
//	                                          upstream state change, on presence queries, and Bye on shutdown
//
// Replies go to the edge's reply subject that the router puts in header
// proto.HdrReplyTo (else the message's own reply subject), in chunks when
// bigger than the connection's max payload. A traced call (header Sy-Trace)
// gets its per-hop stamps back as reply headers (internal/hop). A reply carries
// either the upstream's raw JSON result (an isError tool result included)
// or a proto.Error: the upstream's own JSON-RPC error unchanged, or
// CodeUpstreamUnavailable ("upstream <name> unavailable: <reason>"),
// CodeTimeout, CodeOverloaded (more than MaxInFlight calls),
// CodePayloadTooLarge, CodeBadEnvelope, CodeMethodNotFound (unknown op, or
// an envelope whose Method is not the op's), CodeInvalidParams,
// CodeUnavailable (shutting down) or CodeWorkerLost (cancelled by
// shutdown). A call cancelled by its edge is answered CodeInternal
// ("cancelled"); the edge has stopped waiting by then.
//
// # KV buckets
//
//	switchyard_upstreams  watched: the catalog of upstream specs (owned by tenancy-svc)
//	switchyard_lists      written: key <upstream>.<kind> = proto.ListSet, only when its hash changes
//	                      (the bucket is created, history 1, if missing). Every kind is written on
//	                      connect and on catalog; a kind the upstream does not advertise is empty;
//	                      the upstream's notifications/{tools,prompts,resources}/list_changed
//	                      refetch that kind (resources: resources and resource_templates)
//
// # Upstream sessions
//
// Each served upstream has an actor (internal/upstream). HTTP upstreams
// (streamable, SSE) use a shared pool session for stateless calls and the
// catalog, and one dedicated upstream session per client session, opened
// on its first call and closed on session_closed or after
// SessionIdleTimeout.
//
// Stdio upstreams run spec.Processes processes, each one session shared by
// all the client sessions placed on it (hash of edge and session id;
// stateless calls go round-robin). Per-session features of a stdio
// upstream (logging level, resource subscriptions, roots) are therefore
// shared by the client sessions placed on the same process.
//
// Results are never decoded. On a streamable HTTP upstream a request
// (tools/call and every other forwarded method) bypasses the go-sdk client:
// the worker POSTs the JSON-RPC request itself on the SDK session (same
// headers and per-request _meta as the SDK) and slices the raw `result`
// out of the response; the SDK session still opens the session, pings,
// lists and holds the GET stream. On stdio upstreams the worker writes the
// request itself on the SDK's connection to the process and takes the
// response out of the SDK's message stream. Params go upstream byte for
// byte, except that the per-hop SEP-2575 _meta keys are dropped and the
// router's Name (the upstream's own name) replaces the tool name, the
// prompts/get name and a completion/complete ref/prompt name. On legacy SSE
// upstreams the request goes through the SDK's typed method and the raw
// `result` bytes are captured off the wire (internal/capture) while the
// SDK's typed decoder sees a stub.
package worker
