package proto

import "fmt"

// Error is a wire error. Code is a JSON-RPC error code: either one passed
// through from an upstream, a standard one, or one of the gateway's own codes
// below. Data, if set, is raw JSON. Errors compare by Code, so
// errors.Is(err, ErrNoWorkers) holds after a NATS hop.
type Error struct {
	Code int32  `msgpack:"c"`
	Msg  string `msgpack:"m"`
	Data []byte `msgpack:"d,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Msg, e.Code) }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Standard JSON-RPC codes.
const (
	CodeParseError     int32 = -32700
	CodeInvalidRequest int32 = -32600
	CodeMethodNotFound int32 = -32601
	CodeInvalidParams  int32 = -32602
	CodeInternal       int32 = -32603
)

// Gateway codes, in the reserved block -32060..-32069. The block avoids the
// codes the MCP SDK uses (-32001..-32005, -32020..-32022, -32042); a test
// enforces it.
const (
	CodeNoWorkers           int32 = -32060 // no live worker serves the upstream
	CodeUpstreamUnavailable int32 = -32061 // the upstream is down or unreachable
	CodeTimeout             int32 = -32062 // the call's deadline passed
	CodeOverloaded          int32 = -32063 // a bounded queue is full
	CodeWorkerLost          int32 = -32064 // the worker serving the call went away
	CodePayloadTooLarge     int32 = -32065 // a message exceeds the bus's limit
	CodeBadEnvelope         int32 = -32066 // a bus message could not be decoded
	CodeUnavailable         int32 = -32067 // the gateway itself is not ready
	// CodeNotDelivered: the call reached no worker (its subscription was
	// gone), so it did not run and the edge may place it again.
	CodeNotDelivered int32 = -32068
	// CodeLimited: the tenant or principal is over a limit (request rate
	// or calls in flight); nothing was queued. Data is a JSON object
	// {"limit": "tenant_rate"|"principal_rate"|"in_flight",
	// "retryAfterMs": N}: N is when a retry may succeed (milliseconds).
	CodeLimited int32 = -32069
)

// Sentinels for errors.Is.
var (
	ErrNoWorkers           = &Error{Code: CodeNoWorkers, Msg: "no worker serves the upstream"}
	ErrUpstreamUnavailable = &Error{Code: CodeUpstreamUnavailable, Msg: "upstream unavailable"}
	ErrTimeout             = &Error{Code: CodeTimeout, Msg: "deadline exceeded"}
	ErrOverloaded          = &Error{Code: CodeOverloaded, Msg: "overloaded"}
	ErrWorkerLost          = &Error{Code: CodeWorkerLost, Msg: "worker lost"}
	ErrPayloadTooLarge     = &Error{Code: CodePayloadTooLarge, Msg: "payload too large"}
	ErrBadEnvelope         = &Error{Code: CodeBadEnvelope, Msg: "bad envelope"}
	ErrUnavailable         = &Error{Code: CodeUnavailable, Msg: "gateway unavailable"}
)

// GatewayCodes lists every gateway code, for the uniqueness test and docs.
var GatewayCodes = []int32{
	CodeNoWorkers, CodeUpstreamUnavailable, CodeTimeout, CodeOverloaded,
	CodeWorkerLost, CodePayloadTooLarge, CodeBadEnvelope, CodeUnavailable,
	CodeNotDelivered, CodeLimited,
}
