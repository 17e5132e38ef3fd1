// Package fields lists the JSON-RPC and MCP members the gateway decides
// on, and finds messages that give one of them twice.
//
// The edge, the router and the worker read a request's members in place
// (package jsonscan), and the worker forwards the params to the upstream
// as the client sent them, with only the members it rewrites replaced
// (the tool or prompt name). The upstream decodes them itself, perhaps
// with a decoder that keeps the last of duplicate members, or one that
// matches member names to struct fields without regard to case (Go's
// encoding/json does both: mark3labs/mcp-go and most Go servers are built
// on it). A request whose params carry "name" for a tool the tenant may
// call and "Name" for one it may not would then pass the policy on the
// first and run the second. So the gateway refuses (JSON-RPC -32600,
// Invalid Request) any message in which one of the members listed here is
// given twice, or in another form: with other letter case, or other '_'
// and '-' (see jsonscan.Names), exactly or loosely. Refusing is preferred
// over forwarding a canonical re-encoding: no correct client sends such a
// message (JSON member names are case-sensitive and MCP's are unique), so
// the message is an attack or a bug, and a clear refusal serves both
// better than a silent choice; and the gateway forwards params byte for
// byte (arguments, _meta values and members it does not know reach the
// upstream exactly as sent), which a re-encoding would give up.
//
// The lists are every member any role reads to route, authorize, rewrite
// or answer a request by: the envelope, the params of every forwarded
// method, their _meta, and a completion's ref. Tool arguments are the
// tool's own and are not listed (the router's SEP-2243 check of
// Mcp-Param headers reads argument values: see package paramhdr).
//
// The sets are immutable and safe for concurrent use.
package fields

import (
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// Envelope are the members of a JSON-RPC message the gateway reads:
// request and notification members, and those of a client's response to
// a request the gateway relayed (elicitation, sampling, roots).
var Envelope = jsonscan.NewNames("jsonrpc", "id", "method", "params", "result", "error")

// Indexes in Envelope.
const (
	EnvJSONRPC = iota
	EnvID
	EnvMethod
	EnvParams
	EnvResult
	EnvError
)

// Params are the members of a request's params the gateway reads, for
// any method: what the router routes and the policy decides by (name,
// uri, ref, taskId, cursor), what the worker rewrites or reads (name,
// arguments, _meta, ref, requestState, inputResponses, level), and what
// the edge acts on (requestId of notifications/cancelled, the 2026-07-28
// bridge's requestState and inputResponses, arguments for the audit
// trail).
var Params = jsonscan.NewNames("name", "uri", "arguments", "_meta", "cursor", "taskId",
	"requestState", "inputResponses", "ref", "level", "requestId")

// Indexes in Params.
const (
	ParamName = iota
	ParamURI
	ParamArguments
	ParamMeta
	ParamCursor
	ParamTaskID
	ParamRequestState
	ParamInputResponses
	ParamRef
	ParamLevel
	ParamRequestID
)

// Meta are the members of params._meta the gateway reads: the progress
// token (the fast path leaves calls with one to the SDK; the worker
// replaces it), the SEP-2575 per-request keys (the edge checks them, the
// worker drops them and sends its session's own), the trace context and
// the gateway's own timing switch.
var Meta = jsonscan.NewNames("progressToken",
	"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities",
	"io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/logLevel",
	"io.modelcontextprotocol/subscriptionId",
	"traceparent", "tracestate", "dev.switchyard/timing")

// Indexes in Meta.
const (
	MetaProgressToken = iota
	MetaProtocolVersion
	MetaClientCapabilities
	MetaClientInfo
	MetaLogLevel
	MetaSubscriptionID
	MetaTraceparent
	MetaTracestate
	MetaTiming
	MetaCount // the number of names in Meta
)

// Ref are the members of a completion/complete request's ref: the router
// routes by them and the worker renames a prompt's.
var Ref = jsonscan.NewNames("type", "name", "uri")

// Indexes in Ref.
const (
	RefType = iota
	RefName
	RefURI
)

// Clash is a member given twice, as a path from the message
// ("params.name", "params._meta.progressToken", "method").
type Clash string

// Message is the JSON-RPC error message for a message refused for c.
func (c Clash) Message() string {
	return "Invalid Request: " + string(c) + " is given more than once " +
		`(member names that differ only in letter case, "_" or "-" are the same member)`
}

// CheckParams returns the first member of the params object raw (or of
// its _meta or ref) that clashes (see jsonscan.Scan), and "" when none
// does or raw is not an object. It allocates nothing for keys of plain
// ASCII.
func CheckParams(raw []byte) Clash {
	var clash Clash
	sc := Params.Scan()
	jsonscan.Members(raw, func(k, v []byte) {
		switch sc.Key(k) {
		case ParamMeta:
			if c := CheckIn(v, Meta, "params._meta."); clash == "" {
				clash = c
			}
		case ParamRef:
			if c := CheckIn(v, Ref, "params.ref."); clash == "" {
				clash = c
			}
		}
	})
	if name, ok := sc.Clash(); ok {
		return Clash("params." + name)
	}
	return clash
}

// CheckIn returns the first of names that clashes in the object obj (a
// member's value), as prefix+name; "" when none does or obj is not an
// object.
func CheckIn(obj []byte, names *jsonscan.Names, prefix string) Clash {
	if len(obj) == 0 || obj[0] != '{' {
		return ""
	}
	sc := names.Scan()
	jsonscan.Members(obj, func(k, _ []byte) { sc.Key(k) })
	if name, ok := sc.Clash(); ok {
		return Clash(prefix + name)
	}
	return ""
}

// CheckMessage returns the first member of the JSON-RPC message raw (an
// object: a request, a notification or a response) that clashes, in its
// envelope or its params (see CheckParams); "" when none does.
func CheckMessage(raw []byte) Clash {
	var params []byte
	sc := Envelope.Scan()
	jsonscan.Members(raw, func(k, v []byte) {
		if sc.Key(k) == EnvParams {
			params = v
		}
	})
	if name, ok := sc.Clash(); ok {
		return Clash(name)
	}
	return CheckParams(params)
}
