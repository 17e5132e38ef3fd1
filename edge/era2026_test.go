package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

func TestEdgeUpgrade2026(t *testing.T) {
	for _, c := range []struct{ in, op, want string }{
		{`{"tools":[]}`, proto.OpToolsList, `{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}`},
		{`{"content":[]}`, proto.OpToolsCall, `{"resultType":"complete","content":[]}`},
		{`{}`, proto.OpLoggingSetLevel, `{"resultType":"complete"}`},
		{` { }`, proto.OpResourcesRead, `{"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{`{"resultType":"input_required","inputRequests":{}}`, proto.OpToolsCall, `{"resultType":"input_required","inputRequests":{}}`},
		{`{"ttlMs":5000,"prompts":[]}`, proto.OpPromptsList, `{"resultType":"complete","cacheScope":"private","ttlMs":5000,"prompts":[]}`},
		{`{"contents":[{"ttlMs":1}]}`, proto.OpResourcesRead, `{"resultType":"complete","ttlMs":0,"cacheScope":"private","contents":[{"ttlMs":1}]}`},
		{`[1]`, proto.OpToolsCall, `[1]`},
		{`{"content":[],"inputRequests":{"a":{}},"requestState":"s"}`, proto.OpToolsCall, `{"resultType":"input_required","content":[],"inputRequests":{"a":{}},"requestState":"s"}`},
		{`{"contents":[],"inputRequests":{}}`, proto.OpResourcesRead, `{"resultType":"input_required","contents":[],"inputRequests":{}}`},
	} {
		if got := string(upgrade2026([]byte(c.in), c.op)); got != c.want {
			t.Errorf("upgrade2026(%s, %s) = %s, want %s", c.in, c.op, got, c.want)
		}
	}
}

// TestEdgeParamHeadersReachRouter: a 2026-07-28 tools/call passes its
// Mcp-Param-* headers to the router, and the router's header-mismatch
// error (-32020) is HTTP 400 (SEP-2243).
// TestEdgeUpgrade2026Invalid: a result that is not valid JSON (bytes from
// the bus are not trusted) does not panic the upgrade; it goes out no more
// valid than it came.
func TestEdgeUpgrade2026Invalid(t *testing.T) {
	for _, in := range []string{`{`, `{"a":`, `{"_meta":{"x":1}`, `{x}`} {
		if out := upgrade2026([]byte(in), "tools/call"); json.Valid(out) {
			t.Errorf("upgrade2026(%s) = %s, valid JSON", in, out)
		}
	}
}

func TestEdgeParamHeadersReachRouter(t *testing.T) {
	var nc *nats.Conn
	var got nats.Header
	g := newRig(t, func(m *nats.Msg) {
		got = m.Header
		_ = bus.RespondError(nc, m.Reply, &proto.Error{Code: -32020, Msg: "header mismatch"})
	})
	nc = g.nc
	code, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{"region":"eu"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up__x", "Mcp-Param-Region", "us")
	if code != http.StatusBadRequest || !strings.Contains(body, "-32020") {
		t.Fatalf("HTTP %d %s, want 400 with -32020", code, body)
	}
	if got.Get("Mcp-Param-Region") != "us" {
		t.Fatalf("route message headers %v", got)
	}
}

func TestEdgeDowngrade2025(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"content":[]}`, `{"content":[]}`},
		{`{"resultType":"complete","content":[]}`, `{"content":[]}`},
		{`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"u"}},"resultType":"complete","x":1}`, `{"x":1}`},
		{`{"_meta":{"io.modelcontextprotocol/serverInfo":{},"k":2},"x":1}`, `{"_meta":{"k":2},"x":1}`},
		{`{"resultType":"input_required","inputRequests":{}}`, `{"resultType":"input_required","inputRequests":{}}`},
		{`{"text":"resultType"}`, `{"text":"resultType"}`},
	} {
		if got := string(downgrade2025([]byte(c.in))); got != c.want {
			t.Errorf("downgrade2025(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
