package edge

import (
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// logRank orders the MCP log levels (RFC 5424 severities, least severe
// first).
var logRank = map[string]int{
	"debug": 1, "info": 2, "notice": 3, "warning": 4, "error": 5, "critical": 6, "alert": 7, "emergency": 8,
}

// logGate passes to next every upstream message but the log messages
// (notifications/message) below min: the level the client asked for, with
// logging/setLevel (2025 era) or the request's _meta logLevel (2026 era).
// With no level asked for, no log message passes (SEP-2575, and the SDK's
// reading of 2025-11-25). Upstreams filter too, but a shared upstream
// session filters by whichever client set its level last.
func logGate(next func(*nats.Msg) bool, min string) func(*nats.Msg) bool {
	floor, known := logRank[min]
	return func(m *nats.Msg) bool {
		u, ok := parseUpMsg(m)
		if !ok || u.id != nil || u.method != "notifications/message" {
			return next(m)
		}
		var level string
		jsonscan.Members(u.params, func(k, v []byte) {
			if jsonscan.KeyIs(k, "level") && len(v) > 0 && v[0] == '"' {
				level = jsonscan.Unquote(v)
			}
		})
		if !known || logRank[level] < floor {
			return false // dropped
		}
		return next(m)
	}
}
