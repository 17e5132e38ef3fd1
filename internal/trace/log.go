package trace

import (
	"context"
	"log/slog"

	oteltrace "go.opentelemetry.io/otel/trace"
)

// Log attribute keys (lower_snake, like proto's log keys).
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogAttr returns the slog attribute trace_id of ctx's span, or the empty
// Attr (which handlers drop) when ctx has none; allocation-free either
// way but for the hex id itself. Use it as
// log.Warn("...", trace.LogAttr(ctx), ...).
func LogAttr(ctx context.Context) slog.Attr {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return slog.Attr{}
	}
	return slog.String(LogTraceID, sc.TraceID().String())
}

// LogHandler wraps a slog.Handler: a record logged with a context that
// holds a span (log.InfoContext(ctx, ...)) gets trace_id and span_id
// attributes, so logs and traces join. Records without one pass through
// unchanged.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := oteltrace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}
