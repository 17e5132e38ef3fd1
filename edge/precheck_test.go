package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestEdgeMissingParams: a request whose params the schema requires,
// sent without them (or with null), is answered with a JSON-RPC -32602
// error, not the SDK's plain-text 400; in both eras, on the fast path's
// methods and the SDK's.
func TestEdgeMissingParams(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{sse: true})
	g.initialize()
	tests := []struct {
		name, body string
		hdr        []string
		status     int
	}{
		{"2025 tools/call, no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, nil, http.StatusOK},
		{"2025 prompts/get, null params", `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":null}`, nil, http.StatusOK},
		{"2025 resources/read", `{"jsonrpc":"2.0","id":3,"method":"resources/read"}`, nil, http.StatusOK},
		{"2026 tools/call", `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, []string{"Mcp-Session-Id", "", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"}, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := g.sid
			if tc.hdr != nil {
				g.sid = "" // a 2026 request has no session
				defer func() { g.sid = sid }()
			}
			code, body, _ := g.post(tc.body, tc.hdr...)
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if code != tc.status || json.Unmarshal([]byte(body), &resp) != nil || resp.Error.Code != -32602 || len(resp.ID) == 0 || string(resp.ID) == "null" {
				t.Errorf("HTTP %d %s; want %d with a JSON-RPC -32602 error for the request's id", code, body, tc.status)
			}
		})
	}
	// A list method's params are optional: no refusal.
	if code, body, _ := g.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); code != http.StatusOK || strings.Contains(body, "-32602") {
		t.Errorf("ping without params: HTTP %d %s", code, body)
	}
}
