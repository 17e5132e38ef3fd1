package trace

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// FuzzTraceMeta feeds client-controlled _meta objects and traceparent
// values to the readers and writers: they never panic, a valid _meta stays
// valid JSON with the span's traceparent, and an extracted context is
// either the one written or none.
func FuzzTraceMeta(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"traceparent":"` + clientTP + `"}`,
		`{"a":1,"traceparent":"00-x","tracestate":"s=1","b":{"c":[2]}}`,
		`{"traceparent":1}`, `{"traceparent":"\u0030` + clientTP[1:] + `"}`, `{"a":`, `[1]`,
	} {
		f.Add(s, clientTP)
	}
	p, err := New(Config{Enabled: true}, "edge", WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(discard{})))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, meta, tp string) {
		_ = ExtractMeta(t.Context(), Meta{Raw: json.RawMessage(meta)})
		_ = ExtractMeta(t.Context(), Meta{Params: json.RawMessage(meta)})
		ctx := Extract(t.Context(), nats.Header{KeyTraceparent: {tp}})
		if sc := oteltrace.SpanContextFromContext(ctx); sc.IsValid() && traceparent(sc)[3:52] != tp[3:52] {
			t.Fatalf("traceparent %q read as %s", tp, traceparent(sc))
		}
		ctx, sp := p.StartEdge(ctx, nil, Meta{Raw: json.RawMessage(meta)}, Call{Method: "tools/call"})
		defer sp.End()
		out := InjectMetaJSON(ctx, json.RawMessage(meta))
		if meta == "" || json.Valid([]byte(meta)) && meta[0] == '{' {
			var m map[string]any
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("InjectMetaJSON(%q) = %q: %v", meta, out, err)
			}
			if m[KeyTraceparent] != traceparent(sp.SpanContext()) {
				t.Fatalf("InjectMetaJSON(%q) = %q: not the span's traceparent", meta, out)
			}
		}
	})
}
