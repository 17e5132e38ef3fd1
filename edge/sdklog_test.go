package edge

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestEdgeSDKLogDemoted: the SDK's info records reach the edge's log only
// at debug level; its warnings stay warnings.
func TestEdgeSDKLogDemoted(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"level=WARN msg=w"}},
		{slog.LevelDebug, []string{"level=DEBUG msg=i", "level=WARN msg=w"}},
	} {
		var buf bytes.Buffer
		log := slog.New(demoted{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})}).With("k", "v")
		log.Info("i")
		log.Warn("w")
		out := buf.String()
		if got := strings.Count(out, "\n"); got != len(tc.want) {
			t.Errorf("level %v: %d records: %q", tc.level, got, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) || !strings.Contains(out, "k=v") {
				t.Errorf("level %v: no %q (with k=v) in %q", tc.level, w, out)
			}
		}
	}
}
