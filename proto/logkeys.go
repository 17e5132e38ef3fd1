package proto

// Log attribute keys, shared by every role so that logs join up.
const (
	LogComponent = "component"
	LogTenant    = "tenant"
	LogSession   = "session_id"
	LogTool      = "tool"
	LogUpstream  = "upstream"
	LogWorker    = "worker"
	LogEdge      = "edge"
	LogSubject   = "subject"
	LogMethod    = "method"
	LogErr       = "err"
	LogCallID    = "call_id"
	// LogRequestID is a client's JSON-RPC request id, as sent (raw JSON).
	LogRequestID = "request_id"
	// LogCode is the JSON-RPC error code a request was answered with (0:
	// a result).
	LogCode = "code"
	// LogDuration is how long something took.
	LogDuration = "duration"
	// LogTraceID is the W3C trace id (32 hex digits) of the call a record
	// belongs to, added by internal/trace's LogHandler when tracing is on.
	LogTraceID = "trace_id"
	// LogSpanID is the id (16 hex digits) of the span that logged.
	LogSpanID = "span_id"
)
