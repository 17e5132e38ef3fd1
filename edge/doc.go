// Package edge is Switchyard's client-facing role: it serves MCP over
// streamable HTTP with the official go-sdk and publishes every call onto
// NATS.
//
// # Endpoints
//
//	/mcp              the federated view: every upstream's tools, named <upstream>__<tool>
//	/mcp/<upstream>   the passthrough view of one upstream, with its original names
//	/sse, /sse/<u>    the same views over the legacy HTTP+SSE transport (2024-11-05)
//
// Both protocol eras are served on each endpoint: requests whose
// MCP-Protocol-Version header is 2026-07-28 or later go to a stateless
// handler (the SDK accepts that version only there); everything else,
// including initialize, goes to a stateful handler whose session ids
// (Mcp-Session-Id) start with the edge's id: "<edge>-<random>".
//
// # Fast path
//
// tools/call and tools/list are answered at the HTTP level when the request
// passes every check the go-sdk handler would make (see fastpath.go): the
// params go on the bus as sent and the response is written around the
// result bytes, with no SDK decode or encode. Anything else (initialize,
// batches, progress tokens, unknown sessions, mismatched headers) goes to
// the SDK server, whose receiving middleware forwards the same way. The
// edge, not the SDK, keeps each 2025-era session's idle timer
// (Config.SessionTimeout) and the ids of the calls the fast path serves.
//
// # Bus
//
// tools/list and tools/call are published as msgpack proto.Request on
// switchyard.v1.route.<tenant>.<op> with a reply subject on the edge's
// multiplexed inbox; params and results stay raw JSON. The router answers
// lists itself and forwards calls to a worker, which answers the edge
// directly. The edge watches worker heartbeats (switchyard.v1.evt.worker.*)
// to fail at once a call whose worker went away, listens to
// switchyard.v1.evt.list_changed.<tenant> to send list_changed, watches the
// catalog (KV switchyard_upstreams) for passthrough views, and publishes
// switchyard.v1.evt.session_closed.<edge> when a client session ends.
//
// # Errors
//
// Wire errors are mapped to JSON-RPC in one place ([toJSONRPC]): gateway
// conditions keep their proto codes (-32060..-32069), upstream errors pass
// through with their codes, anything else is -32603 with a correlation id.
package edge
