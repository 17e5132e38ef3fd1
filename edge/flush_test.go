package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// holdAnswered is a slog handler that, once armed, blocks every "request
// answered" record until release is closed: the fast path logs it in its
// deferred bookkeeping, after the response is written.
type holdAnswered struct {
	armed   *atomic.Bool
	release chan struct{}
}

func (h holdAnswered) Enabled(context.Context, slog.Level) bool { return true }
func (h holdAnswered) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h holdAnswered) WithGroup(string) slog.Handler            { return h }
func (h holdAnswered) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "request answered" && h.armed.Load() {
		<-h.release
	}
	return nil
}

// TestFastPathFlushesBeforeBookkeeping: a fast-path response reaches the
// client while the handler's deferred work (audit, metrics, log, span) is
// still running, in every response shape; net/http alone would send it
// only when the handler returns. A 2025-era SSE response answered before
// its stream was primed goes out whole, with a Content-Length.
func TestFastPathFlushesBeforeBookkeeping(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sse     bool
		era2026 bool
	}{
		{"json-2025", false, false},
		{"sse-2025", true, false},
		{"json-2026", false, true},
		{"sse-2026", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			release := make(chan struct{})
			defer close(release)
			var nc *nats.Conn
			g := newRigWith(t, scriptedRouter(&nc, nil), &rigOpts{sse: tc.sse,
				log: slog.New(holdAnswered{armed: &armed, release: release})})
			nc = g.nc
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__odd","arguments":{}}}`
			var hdr []string
			if tc.era2026 {
				body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__odd","arguments":{},` + meta2026 + `}}`
				hdr = hdr2026("tools/call", "up__odd")
			} else {
				g.initialize()
				hdr = []string{"Mcp-Session-Id", g.sid, "Mcp-Protocol-Version", "2025-11-25"}
			}
			armed.Store(true)
			type answer struct {
				resp *http.Response
				body string
				err  error
			}
			got := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for i := 0; i+1 < len(hdr); i += 2 {
					req.Header.Set(hdr[i], hdr[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- answer{resp: resp, body: string(b), err: err}
			}()
			select {
			case a := <-got:
				if a.err != nil {
					t.Fatal(a.err)
				}
				if a.resp.StatusCode != http.StatusOK || !strings.Contains(a.body, `"hologram"`) || !strings.Contains(a.body, `"id":7`) {
					t.Fatalf("HTTP %d %q", a.resp.StatusCode, a.body)
				}
				if a.resp.ContentLength != int64(len(a.body)) || len(a.resp.TransferEncoding) > 0 {
					t.Errorf("Content-Length %d, Transfer-Encoding %v, body %d bytes: want the whole response with its length",
						a.resp.ContentLength, a.resp.TransferEncoding, len(a.body))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no response while the handler's bookkeeping ran: the response waits for the handler to return")
			}
		})
	}
}
