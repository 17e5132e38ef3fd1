package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestEdgeAnswersMessagesInJSONRPC: whatever a POST carries, the edge's
// answer is JSON-RPC (a JSON error response, or an SSE event carrying
// one) or, for what needs no answer, 202 with no body: an unknown
// notification is accepted and ignored; a batch in 2025-06-18 and later, a
// request with a null id, a body of the wrong content type, a POST that
// does not accept SSE, and an unknown session each get a JSON-RPC error.
// On the fast path and on the SDK path, JSON and SSE responses.
func TestEdgeAnswersMessagesInJSONRPC(t *testing.T) {
	const v2025, v2026 = "2025-11-25", "2026-07-28"
	type want struct {
		status int
		code   int64 // the JSON-RPC error's; 0: 202 with an empty body
	}
	tests := []struct {
		name string
		body string
		hdr  []string // headers beyond the session's
		want want
	}{
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever"}`, nil, want{http.StatusAccepted, 0}},
		{"unknown notification with params", `{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}`, nil, want{http.StatusAccepted, 0}},
		{"unknown notification, 2026-07-28", `{"jsonrpc":"2.0","method":"notifications/whatever"}`,
			[]string{"Mcp-Session-Id", "", "Mcp-Protocol-Version", v2026}, want{http.StatusAccepted, 0}},
		{"batch, 2025-11-25", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, nil, want{http.StatusBadRequest, -32600}},
		{"batch, 2025-06-18", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, []string{"Mcp-Protocol-Version", "2025-06-18"}, want{http.StatusBadRequest, -32600}},
		{"batch of notifications, 2025-03-26", `[{"jsonrpc":"2.0","method":"notifications/whatever"}]`, []string{"Mcp-Protocol-Version", "2025-03-26"}, want{http.StatusAccepted, 0}},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, nil, want{http.StatusBadRequest, -32600}},
		{"null id, 2026-07-28", `{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{` + meta2026 + `}}`,
			[]string{"Mcp-Session-Id", "", "Mcp-Protocol-Version", v2026}, want{http.StatusBadRequest, -32600}},
		{"text content", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Content-Type", "text/plain"}, want{http.StatusUnsupportedMediaType, -32600}},
		{"no SSE in Accept", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Accept", "application/json"}, want{http.StatusBadRequest, -32600}},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Mcp-Session-Id", "no-such-session"}, want{http.StatusNotFound, -32600}},
		{"foreign origin", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Origin", "https://evil.example"}, want{http.StatusForbidden, -32600}},
	}
	for _, o := range []rigOpts{{}, {sse: true}, {noFastPath: true}} {
		t.Run(fmt.Sprintf("sse=%v/fast=%v", o.sse, !o.noFastPath), func(t *testing.T) {
			g := newRigWith(t, nil, &o)
			g.initialize()
			for _, tc := range tests {
				hdr := append([]string{"Mcp-Protocol-Version", v2025}, tc.hdr...)
				code, body, h := g.post(tc.body, hdr...)
				if code != tc.want.status {
					t.Errorf("%s: HTTP %d %q, want %d", tc.name, code, body, tc.want.status)
					continue
				}
				if tc.want.code == 0 {
					if body != "" {
						t.Errorf("%s: body %q, want none", tc.name, body)
					}
					continue
				}
				if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("%s: Content-Type %q, want application/json", tc.name, ct)
				}
				var resp struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   *struct {
						Code    int64  `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.JSONRPC != "2.0" || resp.Error == nil {
					t.Errorf("%s: body %q is not a JSON-RPC error response", tc.name, body)
					continue
				}
				if resp.Error.Code != tc.want.code || resp.Error.Message == "" {
					t.Errorf("%s: error %+v, want code %d", tc.name, resp.Error, tc.want.code)
				}
				if id := string(resp.ID); id != "null" && id != "1" {
					t.Errorf("%s: id %s", tc.name, id)
				}
			}
			// The session is unharmed.
			if ex := g.exchange(`{"jsonrpc":"2.0","id":7,"method":"ping"}`); !strings.Contains(fmt.Sprint(ex.Body), "result") {
				t.Errorf("ping after: %+v", ex)
			}
		})
	}
}

// TestEdgeLegacySSEAnswersInJSONRPC: a legacy SSE POST the edge or the SDK
// refuses gets a JSON-RPC error body, at the edge holding the stream and
// at another edge (forwarded); what is fine is accepted (202).
func TestEdgeLegacySSEAnswersInJSONRPC(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{sse: true})
	other := newRigWith(t, nil, &rigOpts{sse: true, server: g.srv, id: "edge-u"})
	base, otherBase := strings.TrimSuffix(g.url, "/mcp"), strings.TrimSuffix(other.url, "/mcp")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	endpoint, _ := openLegacyStream(t, ctx, base, "")
	tests := []struct {
		name, path, body string
		status           int
	}{
		{"not JSON", endpoint, `{"jsonrpc":`, http.StatusBadRequest},
		{"unknown session", "/sse?sessionid=nope", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, http.StatusNotFound},
		{"initialize", endpoint, initBody, http.StatusAccepted},
	}
	for _, b := range []string{base, otherBase} {
		for _, tc := range tests {
			code, h, body := rawDo(t, b, tc.path, "", http.MethodPost, tc.body)
			if code != tc.status {
				t.Errorf("%s at %s: %d %q, want %d", tc.name, b, code, body, tc.status)
				continue
			}
			if code == http.StatusAccepted {
				continue
			}
			var resp struct {
				JSONRPC string `json:"jsonrpc"`
				Error   *struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			if !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(body), &resp) != nil ||
				resp.JSONRPC != "2.0" || resp.Error == nil || resp.Error.Code != -32600 {
				t.Errorf("%s at %s: %q %q, want a JSON-RPC error -32600", tc.name, b, h.Get("Content-Type"), body)
			}
		}
	}
}
