package edge

import (
	"testing"

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
	} {
		if got := string(upgrade2026([]byte(c.in), c.op)); got != c.want {
			t.Errorf("upgrade2026(%s, %s) = %s, want %s", c.in, c.op, got, c.want)
		}
	}
}
