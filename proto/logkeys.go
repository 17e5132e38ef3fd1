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
)
