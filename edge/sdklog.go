package edge

import (
	"context"
	"log/slog"
)

// demoted is the slog handler the edge gives the go-sdk: the SDK logs
// every session's lifecycle at info ("server connecting", "server session
// connected", with the session id), which for stateless 2026-07-28
// requests is three records per request. Those become debug records;
// warnings and errors pass unchanged.
type demoted struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demote(l))
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.h.WithAttrs(as)} }
func (d demoted) WithGroup(name string) slog.Handler    { return demoted{d.h.WithGroup(name)} }
