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
//	<the call's reply subject>                header Sy-Msg: the upstream's notifications and requests of
//	                                          the call, raw JSON-RPC, before the reply (see Relaying)
//	switchyard.v1.edge.<edge>.msg             headers Sy-Msg and Sy-Session: a client session's
//	                                          session-level messages (see Relaying)
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
// # Upstream credentials
//
// An HTTP upstream whose spec has Auth gets the headers it names (a
// bearer token, static headers) on every request, read from this
// worker's environment and files each time a session is opened; a
// missing variable or file keeps the upstream down with an error naming
// it. A forwarded call's header proto.HdrAuthorization (the client's
// Authorization) is sent as that call's Authorization only when the spec
// has Auth.Passthrough, and ignored otherwise. See
// internal/upstream/auth.go and docs/upstream-auth.md.
//
// # Relaying
//
// What an upstream sends besides its responses reaches the client through
// its edge (proto.HdrMessage), as raw JSON-RPC: notifications (progress,
// logging, resources/updated, elicitation/complete) and requests
// (elicitation/create, sampling/createMessage, roots/list). A message of a
// call goes on the call's reply subject, on the worker's one connection,
// so NATS delivers it before the reply; a request carries a reply inbox
// where the edge publishes the client's JSON-RPC response, which the
// worker hands to the upstream under the upstream's own request id. When
// the call ends first the worker stops waiting and answers the upstream
// -32603 "request cancelled". A session-level message (one of no call) of
// a client session goes to switchyard.v1.edge.<edge>.msg with
// proto.HdrSession, and such a request waits at most CallTimeout.
// notifications/{tools,prompts,resources}/list_changed are not relayed:
// they refresh the catalog, and routers tell the clients.
//
// A request whose _meta has a progressToken goes upstream with a
// worker-unique token ("sy-<worker>-<n>") instead, so that the clients
// sharing a stdio process cannot mix theirs up; the upstream's progress
// with that token goes to the call with the client's token restored byte
// for byte, until the call ends.
//
// Which call or session a message belongs to, when it does not arrive in
// the call's own response stream (a streamable POST's SSE response): see
// internal/upstream (routeConn). In short, the one call in flight on the
// upstream session if there is exactly one, else the client session a
// dedicated session serves, else nobody (a stdio process shared by
// several sessions: logged at debug, a request answered -32603);
// resources/updated always goes to the client sessions that subscribed to
// the URI through that upstream session.
//
// Upstream sessions declare client capabilities: a dedicated session its
// client's (proto.Request.ClientCaps), a shared one what the gateway can
// relay (elicitation form and url, sampling, roots). A 2025-era client
// whose call meets an upstream session at 2026-07-28 gets that upstream's
// input_required results as relayed requests, and the worker calls again
// with the answers (the reverse era bridge, up to 10 rounds). A 2026-era
// client whose call meets a 2025-11-25 session gets a result with
// inputRequests but no resultType marked input_required.
//
// # KV buckets
//
//	switchyard_upstreams  watched: the catalog of upstream specs (owned by tenancy-svc)
//	switchyard_lists      written: key <upstream>.<kind> = proto.ListSet, when its hash or hints change
//	                      or it follows a list_changed
//	                      (the bucket is created, history 1, if missing). Every kind is written on
//	                      connect and on catalog; a kind the upstream does not advertise is empty;
//	                      the upstream's notifications/{tools,prompts,resources}/list_changed
//	                      refetch that kind (resources: resources and resource_templates), and
//	                      so does the end of its ttlMs (SEP-2549 hints, kept in the set's
//	                      TTLMs and CacheScope; at least a second apart)
//
// # Upstream sessions
//
// Each served upstream has an actor (internal/upstream). HTTP upstreams
// (streamable, SSE) use a shared pool session for stateless calls and the
// catalog, and one dedicated upstream session per client session, opened
// on its first call and closed on session_closed or after
// SessionIdleTimeout. A dedicated session asks for 2025-11-25, or for
// 2026-07-28 when the upstream keeps no 2025 sessions (it gives them no
// session id) but speaks 2026-07-28 (logging/setLevel and resource
// subscriptions then still go out as 2025-11-25 requests, and the logging
// level travels with every request).
//
// Stdio upstreams run spec.Processes processes, each one session shared by
// all the client sessions placed on it (hash of edge and session id;
// stateless calls go round-robin). Per-session features of a stdio
// upstream (logging level, roots) are therefore shared by the client
// sessions placed on the same process; resource subscriptions are tracked
// per client session (an unsubscribe while another client session is still
// subscribed to the URI stays in the worker).
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
