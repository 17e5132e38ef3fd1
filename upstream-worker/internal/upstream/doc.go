// Package upstream runs the worker's connection to one upstream MCP server:
// an [Upstream] is an actor that owns the upstream's sessions, supervises
// them, publishes the upstream's lists, and forwards requests through them
// with the raw result bytes: tools/call ([Upstream.Call]) and every other
// method proto.Forwarded maps ([Upstream.Request]: prompts, resources,
// resource templates, subscriptions, completion, logging/setLevel).
//
// # Calls
//
// Every method takes the path tools/call takes, described below for
// tools/call; the request's params are the client's byte for byte
// (rawParams) with the hop _meta keys dropped and, where the router renamed
// (prompts/get "name", completion/complete ref/prompt "name"), the
// upstream's own name. On 2026-07-28 sessions Mcp-Name is set for
// tools/call, prompts/get and resources/read (the URI), and the session's
// SEP-2575 _meta members are added to every request but logging/setLevel
// and resources/(un)subscribe, which the SDK client sends without them.
//
// On a streamable HTTP upstream, tools/call does not go through the go-sdk
// ClientSession, whose per-call cost (jsonrpc2 machinery, SSE reader, typed
// decode) dominated the worker's CPU: rawCall POSTs the JSON-RPC request on
// the session's own HTTP chain with the headers and SEP-2575 _meta the
// SDK's streamable client would send (session id, protocol version; on
// 2026-07-28 sessions Mcp-Method, Mcp-Name and the SEP-2243 Mcp-Param-*
// headers, taken from the catalog), and reads the application/json or
// text/event-stream answer in place: the result bytes are a slice of the
// response message. In the stream, notifications and server-to-client
// requests are the call's: they are relayed (see Relaying; a request
// without a relay, or of another method, is answered as the SDK client
// without handlers would: ping and roots/list empty results, sampling and
// elicitation errors, other methods -32601). An interrupted stream is resumed with Last-Event-ID, a cancelled call
// sends notifications/cancelled, a message above MaxResultBytes fails the
// call. The ClientSession still opens and owns the session (initialize or
// server/discover, the GET stream, pings, tools/list).
//
// On stdio upstreams pipeCall does the same on the process's connection,
// which is the worker's own (stdioTransport: the SDK's decodes every line
// three times): it writes the tools/call request (SEP-2575 _meta on
// 2026-07-28 sessions) with its own id ("sy-<n>") as a line on the
// process's stdin, and the connection's Read, in line order, hands the
// response line to pipeConn.take before anything decodes it; everything
// else (the server's requests, notifications, the SDK's own responses) is
// decoded once and reaches the SDK, which answers it, except the messages
// relayed out of it (see Relaying). A read failure (the process exited) fails every pending
// call at once; a cancelled call sends notifications/cancelled.
//
// On legacy SSE upstreams calls go through the SDK, whose typed decoder
// sees a stub while package capture takes the raw result off the wire;
// other methods use the SDK's typed method (ListPrompts, GetPrompt,
// ReadResource, Complete, ...) the same way, so there the params are
// decoded into the method's typed params (unknown members are not
// forwarded). On a 2026-07-28 SDK session a method the SDK caches (lists,
// resources/read) gets no stub, so the cache holds the real result.
//
// # Relaying
//
// A call run with a [Relay] in its context ([WithRelay]) gets the
// upstream's notifications and requests that belong to it; [Options.Sessions]
// gives the relay of a client session for session-level ones. Messages
// travel raw where the worker reads them itself: a streamable POST's
// response stream (rawcall.go inStream: everything in it is the call's),
// a stdio process (pipeConn) and a legacy SSE session (relayConn), both
// routed by routeConn on the SDK's reader goroutine, in order, before the
// SDK sees them. The GET stream of a streamable session only the SDK
// reads: a receiving middleware on each session's client takes those
// (sdkrelay.go), encoding the SDK's typed params again, and answering with
// the client's result bytes; it runs before the SDK's handlers, so the
// SDK's elicitation schema check, stricter than the spec, does not apply.
//
// Routing of a message that is not in a call's own response stream:
//
//   - notifications/progress: the call whose progress token it carries.
//     A call's request that has a _meta progressToken goes upstream with
//     a token of ours ("sy-<worker>-<n>"), mapped to the call and the
//     client's raw token until the call ends; the notification goes out
//     with the client's token restored byte for byte. Stdio sessions are
//     shared by several clients, whose tokens could collide.
//   - notifications/resources/updated: session-level, wherever it
//     arrives: to the client session a dedicated session serves, or on a
//     shared session to every client session that subscribed to its URI
//     through that session (resources/subscribe and resources/unsubscribe
//     are tracked per upstream session; an unsubscribe while another
//     client session is still subscribed is answered {} by the worker;
//     [Upstream.SessionClosed] drops a session's subscriptions).
//   - logging (notifications/message), notifications/elicitation/complete,
//     and the requests elicitation/create, sampling/createMessage and
//     roots/list: the call in flight on that upstream session if there is
//     exactly one; else the client session it is dedicated to; else (a
//     stdio process, or the HTTP pool, with several calls in flight or
//     none) nobody: logged at debug, a request answered -32603. A stdio
//     message names no call, so this is the rule there; a streamable
//     upstream with JSON responses sends its calls' messages on the GET
//     stream, where the same rule finds the call.
//   - notifications/{tools,prompts,resources}/list_changed: not relayed;
//     they mark the lists dirty (the catalog refresh).
//   - everything else (ping, cancellations, unknown methods): the SDK.
//
// A relayed request waits on its own goroutine (at most 256 per upstream)
// for the client's answer, bounded by its call, or by
// [Options.AskTimeout] for a session-level one; when that ends first the
// upstream is answered -32603 "request cancelled". The client's result or
// error goes to the upstream under the upstream's own id. (A request the
// upstream cancels itself is not withdrawn from the client.)
//
// # Client capabilities
//
// A dedicated session declares its client's capabilities
// (proto.Request.ClientCaps of the call that opened it), a shared one what
// the gateway can relay: elicitation (form, url), sampling, roots. On a
// 2026-07-28 session, where capabilities travel in each request's _meta,
// a request declares its own client's (ClientCaps, or a 2026 client's
// clientCapabilities member) instead of the session's (caps.go).
//
// # Reverse era bridge
//
// A 2025-era client's call (Request.Session set, Protocol before
// 2026-07-28) that meets an upstream session at 2026-07-28 may get an
// input_required result from tools/call, prompts/get or resources/read,
// which that client cannot handle: the worker relays each input request to
// it as a server-to-client request, calls the upstream again with
// inputResponses and the requestState, and returns the final result (up
// to 10 rounds; a client's error fails the call). A 2026 client gets
// input_required results unchanged. The other way round, a 2026 client's
// call on a session before 2026-07-28 may get the multi-round result an
// SDK server makes for older clients (inputRequests and requestState,
// without resultType): the worker marks it input_required, so that the
// client answers it and calls again (bridge.go).
//
// # Catalog
//
// The catalog is one [proto.ListSet] per list kind (tools, prompts,
// resources, resource templates), every page, raw item objects in the
// upstream's order, listed through the pool session (HTTP) or the first
// process (stdio) for each kind the upstream's capabilities advertise; a
// kind it does not advertise is stored empty, so a capability that goes
// away clears its list. It is fetched on connect, on op catalog
// ([Upstream.RefreshCatalog]) and, per kind, on the upstream's
// notifications/tools/list_changed, prompts/list_changed and
// resources/list_changed (the last refetches resources and resource
// templates). A failed tools/list fails the refresh (and, on connect, the
// connection); a failed listing of another kind is logged and leaves that
// kind's stored set as it was.
//
// Each set carries the upstream's SEP-2549 caching hints (TTLMs,
// CacheScope), merged over the list's pages: the smallest ttlMs, and
// cacheScope "public" only if every page said so, else "private" (a page
// without the member counts as ttlMs 0 or private; a member absent on
// every page stays absent: nil, ""). The gateway honours the hint in its
// own copy: a kind whose stored set has a positive ttlMs is listed again
// that long after each listing (at least a second apart), unless a
// list_changed or a catalog op lists it first; such a refresh is not
// stamped Notified. The timers stop while the upstream is down and when
// Run returns.
//
// # Sessions
//
// HTTP upstreams (streamable, legacy SSE) have a shared pool session, used
// for stateless calls (proto.Request.Session == "") and for the catalog,
// plus one dedicated upstream session per client session (keyed by
// Request.Edge and Request.Session), opened on the session's first call and
// closed on [Upstream.SessionClosed] or after the idle timeout. Dedicated
// sessions ask for protocol 2025-11-25, the era of the client sessions they
// mirror; when the upstream gives such a session no session id (it keeps
// no state for it, so it can send it no request) and the pool negotiated
// 2026-07-28, the session is reopened at 2026-07-28, and so are the
// upstream's later dedicated sessions: the reverse era bridge then brings
// the upstream's input requests to the client. On such a session the
// methods 2026-07-28 removed (logging/setLevel, resources/subscribe,
// resources/unsubscribe) go out as on the 2025-11-25 session it replaces,
// and the level logging/setLevel set travels in every later request's
// _meta (logLevel), where 2026-07-28 takes it.
//
// Stdio upstreams run spec.Processes processes (default 1), each one
// session shared by every client session: a client session is placed on
// process hash(edge, session) % Processes, stateless calls go round-robin.
//
// A call that fails with mcp.ErrSessionMissing (HTTP 404 on a session with
// an id) drops that session, opens a new one and is retried once.
//
// # Supervision
//
// Run connects the pool (HTTP) or starts the processes (stdio), fetches the
// lists and writes them to the [ToolStore], and only then reports the
// upstream up. The pool session is pinged every PingInterval (bounded by
// PingTimeout); a failed ping or an exited process marks the upstream down
// (with the error text) and reconnects with backoff (BackoffMin doubling to
// BackoffMax). While down, calls fail at once with
// proto.CodeUpstreamUnavailable.
//
// Sessions are closed asynchronously by a [Closer] (a stdio close can take
// seconds), so neither a call nor the actor ever waits for one.
package upstream
