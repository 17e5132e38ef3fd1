// Package taskserver is a test fixture: an MCP upstream that implements the
// tasks extension io.modelcontextprotocol/tasks (SEP-2663, protocol revision
// 2026-07-28) in front of a streamable-HTTP MCP handler that does not.
//
// The go-sdk (v1.8.0) has no tasks support, so [Server] works at the
// HTTP/JSON-RPC level. It reads each POST body and, for a single JSON-RPC
// request:
//
//   - answers tasks/get, tasks/update and tasks/cancel itself;
//   - answers tools/call for its fixture tools itself (see below);
//   - forwards tools/list and appends the fixture tools, each with
//     execution.taskSupport, to the last page of the result;
//   - forwards server/discover and initialize and adds
//     capabilities.extensions["io.modelcontextprotocol/tasks"];
//   - forwards everything else unchanged. tasks/result and tasks/list, removed
//     by SEP-2663, therefore get the wrapped handler's -32601.
//
// Batches, notifications, responses and non-POST requests go to the wrapped
// handler untouched. Forwarded responses may be application/json or SSE.
//
// # Fixture tools
//
// These are the tools the conformance suite's tasks scenarios call:
//
//   - greet {name}: sync only; "Hello, {name}!". Served only when
//     [Options].Greet is set (the wrapped handler may have its own).
//   - slow_compute {seconds, label}: optional task support; completes after
//     seconds; cancellable.
//   - failing_job: required task support; after about a second it completes
//     with result.isError.
//   - protocol_error_job: optional task support; the task fails with an
//     inlined JSON-RPC error.
//   - confirm_delete {filename}: required task support; parks in
//     input_required on one elicitation/create input request.
//   - multi_input: required task support; parks on two input requests at
//     once, answerable one at a time.
//   - test_tool_with_task: required task support; round 1 is an SEP-2322
//     InputRequiredResult asking for user_name, round 2 (with the answer)
//     creates a task whose result greets that name.
//
// # Negotiation and headers
//
// A request declares the extension when its
// _meta["io.modelcontextprotocol/clientCapabilities"].extensions holds
// "io.modelcontextprotocol/tasks" (SEP-2575: every request carries its own
// capabilities). tasks/* from a request that does not are rejected with
// -32021; so is tools/call of a required-task tool. An optional-task tool
// then runs synchronously.
//
// When Mcp-Protocol-Version is 2026-07-28 or later, requests the fixture
// answers itself are checked as SEP-2243 asks: Mcp-Method must equal the body
// method, and Mcp-Name must equal params.name (tools/call) or params.taskId
// (tasks/*). A missing or different value is -32020 with HTTP 400.
//
// Tasks live in memory. A terminal (or parked) task stays readable for ttlMs
// after its last change.
package taskserver
