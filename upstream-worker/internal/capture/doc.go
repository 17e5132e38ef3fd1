// Package capture recovers the raw JSON result of an upstream MCP call.
//
// The go-sdk client decodes every result into typed structs: it fails on
// content types it does not know, and re-marshalling changes bytes and number
// precision. A gateway must hand the client exactly what the upstream sent, so
// this package lifts the `result` bytes out of the response before the SDK
// decodes it, and optionally substitutes a small stub that the typed decoder
// accepts.
//
// A call opts in by carrying a [Slot] in its context ([With]). Two hooks then
// record the call's JSON-RPC id when the request is written and fill the slot
// when the matching response is read:
//
//   - [WrapTransport] wraps an mcp.Transport (stdio, legacy SSE): the wrapped
//     mcp.Connection sees *jsonrpc.Request on Write and *jsonrpc.Response on
//     Read. In go-sdk v1.8.0 only the streamable client connection implements
//     the SDK's unexported clientConnection interface (streamable.go:
//     `var _ clientConnection = (*streamableClientConn)(nil)`), so wrapping
//     any other connection loses nothing.
//   - [NewRoundTripper] wraps the http.RoundTripper of one streamable HTTP
//     session: the streamable connection must not be wrapped (the SDK calls
//     its unexported sessionUpdated method), so the capture happens on the
//     HTTP bodies instead: POST bodies give the ids, application/json and
//     text/event-stream response bodies are rewritten.
//
// Ids are per connection, so every upstream session gets its own hook.
package capture
