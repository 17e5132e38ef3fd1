// Package upstream runs the worker's connection to one upstream MCP server:
// an [Upstream] is an actor that owns the upstream's sessions, supervises
// them, publishes the upstream's tool set, and serves tools/call through
// them with the raw result bytes (package capture).
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
// A call that fails with mcp.ErrSessionMissing drops that session, opens a
// new one and is retried once.
//
// # Supervision
//
// Run connects the pool (HTTP) or starts the processes (stdio), fetches the
// tool list and writes it to the [ToolStore], and only then reports the
// upstream up. The pool session is pinged every PingInterval (bounded by
// PingTimeout); a failed ping or an exited process marks the upstream down
// (with the error text) and reconnects with backoff (BackoffMin doubling to
// BackoffMax). While down, calls fail at once with
// proto.CodeUpstreamUnavailable.
//
// Sessions are closed asynchronously by a [Closer] (a stdio close can take
// seconds), so neither a call nor the actor ever waits for one.
package upstream
