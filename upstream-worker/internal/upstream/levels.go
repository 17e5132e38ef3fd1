package upstream

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Log levels across eras and clients (MCP server/utilities/logging). A
// 2025-era upstream sends log messages only at or above the level a
// logging/setLevel set (many send none before one). The edge filters
// each client's messages by that client's own level (a 2025-era
// session's logging/setLevel, a 2026-07-28 request's logLevel _meta), so
// the worker only has to make the upstream send enough:
//
//   - a 2026-07-28 request with a logLevel, to an upstream session that
//     negotiated 2025-era, first sets the session's level to it when the
//     session's is less verbose (or unset);
//   - a client's logging/setLevel on a session shared by several clients
//     (the HTTP pool, a stdio process) makes the session more verbose,
//     never less: another client may need what it sends. One that would
//     make it less verbose is answered {} without reaching the upstream;
//   - a shared session opened again (a process restarted, the pool
//     reconnected) gets the most verbose level any client asked of the
//     upstream's shared sessions since the worker started (sharedLevel).
//
// A dedicated session (one client session's) forwards its client's
// logging/setLevel as it is.

// levelRank orders the syslog levels MCP uses, the most verbose first.
var levelRank = map[string]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// moreVerbose reports whether level a asks for more messages than b (""
// asks for none: any level is more verbose than it).
func moreVerbose(a, b string) bool {
	ra, ok := levelRank[a]
	if !ok {
		return false
	}
	rb, ok := levelRank[b]
	return !ok || ra < rb
}

// sharedLevels remembers the most verbose level asked of an upstream's
// shared sessions, and each client session's own (for its dedicated
// session, set again when that is opened again).
type sharedLevels struct {
	mu      sync.Mutex
	level   string             // guarded by mu
	byOwner map[sessKey]string // guarded by mu
}

func (l *sharedLevels) noteOwner(k sessKey, level string) {
	l.mu.Lock()
	if l.byOwner == nil {
		l.byOwner = map[sessKey]string{}
	}
	l.byOwner[k] = level
	l.mu.Unlock()
}

func (l *sharedLevels) owner(k sessKey) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byOwner[k]
}

func (l *sharedLevels) forget(k sessKey) {
	l.mu.Lock()
	delete(l.byOwner, k)
	l.mu.Unlock()
}

func (l *sharedLevels) note(level string) {
	l.mu.Lock()
	if moreVerbose(level, l.level) {
		l.level = level
	}
	l.mu.Unlock()
}

func (l *sharedLevels) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level
}

// ensureLevel sends logging/setLevel level on s when s is less verbose (or
// has none), through its SDK client session. Errors: the upstream's.
func (u *Upstream) ensureLevel(ctx context.Context, s *session, level string) error {
	s.levelMu.Lock()
	defer s.levelMu.Unlock()
	if !moreVerbose(level, s.level) {
		return nil
	}
	if err := s.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(level)}); err != nil {
		return err
	}
	s.level = level
	if s.owner == nil {
		u.levels.note(level)
	}
	return nil
}

// legacySession reports whether s negotiated a 2025-era protocol (its
// upstream takes logging/setLevel, not a logLevel _meta).
func legacySession(s *session) bool {
	ir := s.cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion < protocol2026
}

// requestLevel returns the logLevel _meta member of a 2026-era request's
// params ("" if none).
func requestLevel(req *proto.Request) string {
	if req.Protocol < protocol2026 {
		return ""
	}
	var level string
	jsonscan.Members(req.Params, func(k, v []byte) {
		if !jsonscan.KeyIs(k, "_meta") {
			return
		}
		jsonscan.Members(v, func(k, v []byte) {
			if jsonscan.KeyIs(k, mcp.MetaKeyLogLevel) && len(v) > 0 && v[0] == '"' {
				level = jsonscan.Unquote(v)
			}
		})
	})
	if _, ok := levelRank[level]; !ok {
		return ""
	}
	return level
}

// levelOf returns the level of a logging/setLevel's params ("" if none).
func levelOf(params json.RawMessage) string {
	var level string
	jsonscan.Members(params, func(k, v []byte) {
		if jsonscan.KeyIs(k, "level") && len(v) > 0 && v[0] == '"' {
			level = jsonscan.Unquote(v)
		}
	})
	return level
}

// setLevelOnShared wraps the attempt of a client's logging/setLevel: on
// a shared 2025-era session it makes the session more verbose
// (ensureLevel) or answers {} as it is; elsewhere (a dedicated session, a
// 2026-era one) it forwards the request as before and remembers the level.
func (u *Upstream) setLevelOnShared(req *proto.Request, next sendFunc) sendFunc {
	level := levelOf(req.Params)
	return func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
		if s.owner != nil || level == "" || s.cs == nil || !legacySession(s) {
			res, err := next(ctx, s, l)
			if err == nil && level != "" {
				s.levelMu.Lock()
				s.level = level
				s.levelMu.Unlock()
				if s.owner != nil {
					u.levels.noteOwner(*s.owner, level)
				}
			}
			return res, err
		}
		if err := u.ensureLevel(ctx, s, level); err != nil {
			return nil, err
		}
		return []byte(`{}`), nil
	}
}

// reapplyLevel sets a newly opened session's level: a dedicated one's to
// its client session's last logging/setLevel, a shared one's to the most
// verbose level clients asked of the upstream's shared sessions; none if
// none was asked. A failure is logged (the session serves all the same).
func (u *Upstream) reapplyLevel(ctx context.Context, s *session) {
	if s.cs == nil || !legacySession(s) {
		return
	}
	level := u.levels.get()
	if s.owner != nil {
		level = u.levels.owner(*s.owner)
	}
	if level == "" {
		return
	}
	if err := u.ensureLevel(ctx, s, level); err != nil {
		u.log.WarnContext(ctx, "log level not set again on a new upstream session", "level", level, proto.LogErr, err)
	}
}
