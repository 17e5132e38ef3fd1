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
// response message. In the stream, server-to-client requests are answered
// as the SDK client would answer them (ping, roots/list: empty results;
// sampling and elicitation: errors; other methods: -32601); notifications
// are dropped for now (Upstream.notification is the hook to relay them).
// An interrupted stream is resumed with Last-Event-ID, a cancelled call
// sends notifications/cancelled, a message above MaxResultBytes fails the
// call. The ClientSession still opens and owns the session (initialize or
// server/discover, the GET stream, pings, tools/list).
//
// On stdio upstreams pipeCall does the same on the process's connection:
// it writes the tools/call request (SEP-2575 _meta on 2026-07-28 sessions)
// with its own id ("sy-<n>") on the SDK's connection, and pipeConn, the
// outermost wrapper of that connection, takes the response out of the
// SDK's message stream; everything else (the server's requests,
// notifications, the SDK's own responses) still reaches the SDK, which
// answers it. A read failure (the process exited) fails every pending call
// at once; a cancelled call sends notifications/cancelled.
//
// On legacy SSE upstreams calls go through the SDK, whose typed decoder
// sees a stub while package capture takes the raw result off the wire;
// other methods use the SDK's typed method (ListPrompts, GetPrompt,
// ReadResource, Complete, ...) the same way, so there the params are
// decoded into the method's typed params (unknown members are not
// forwarded). On a 2026-07-28 SDK session a method the SDK caches (lists,
// resources/read) gets no stub, so the cache holds the real result.
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
// # Sessions
//
// HTTP upstreams (streamable, legacy SSE) have a shared pool session, used
// for stateless calls (proto.Request.Session == "") and for the catalog,
// plus one dedicated upstream session per client session (keyed by
// Request.Edge and Request.Session), opened on the session's first call and
// closed on [Upstream.SessionClosed] or after the idle timeout. Dedicated
// sessions ask for protocol 2025-11-25, the era of the client sessions they
// mirror.
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
