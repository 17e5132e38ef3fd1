// Package stdiofront bridges the MCP stdio transport to a remote
// Switchyard's streamable HTTP endpoint, for desktop clients that can only
// spawn a process (`switchyard stdio --url URL`).
//
// # Wire
//
// Each stdin line (one JSON-RPC message) becomes one POST to the URL;
// every message the gateway sends back (a JSON body, or the message events
// of an SSE stream) becomes one stdout line. POSTs start in stdin order
// and run concurrently (a client answers an elicitation while the call
// that asked is still streaming); what follows initialize waits for its
// answer, which names the session. After the client's
// notifications/initialized, a GET stream carries the server's own
// messages (reconnected with Last-Event-ID when it drops). On stdin EOF
// the bridge waits for the calls in flight and DELETEs the session; a 404
// for the session ends it with [ErrSessionExpired].
//
// Messages stay raw JSON: the bridge reads a few top-level members in
// place ([jsonscan]) and forwards the bytes it was given, so ids (integers
// beyond 2^53 included), params and results are never re-encoded. A body
// that spans lines is compacted, which keeps every literal as written.
//
// # Headers
//
// Mcp-Session-Id comes from the initialize response; MCP-Protocol-Version
// is the protocolVersion of the initialize result, or, for a message that
// names one in params._meta (the 2026-07-28 era, sessionless), that one,
// since the gateway picks the era by the header. In that era the bridge
// also sends the Mcp-Method and Mcp-Name headers the spec requires of
// HTTP clients (Mcp-Param-* headers are not derived).
//
// [jsonscan]: github.com/switchyard-mcp/switchyard/internal/jsonscan
package stdiofront
