package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestDecodeCache(t *testing.T) {
	c := newDecodeCache[mcp.Implementation]()
	for _, tc := range []struct {
		in   string
		want bool
		kept int // values kept afterwards
	}{
		{`{"name":"a","version":"1"}`, true, 1},
		{`{"name":"a","version":"1"}`, true, 1}, // a hit
		{`{"name":1}`, false, 1},                // fails, not kept
		{`{"name":1}`, false, 1},                // fails again: failures are not remembered
		{`{"name":"a","version":"1"} `, true, 2},
		{`[]`, false, 2},
		{`{"name":"` + strings.Repeat("x", decodeCacheMaxValue) + `"}`, true, 2}, // too long to keep
	} {
		if got := c.valid([]byte(tc.in)); got != tc.want {
			t.Errorf("valid(%.40q) = %v, want %v", tc.in, got, tc.want)
		}
		if c.len() != tc.kept {
			t.Errorf("after %.40q: %d kept, want %d", tc.in, c.len(), tc.kept)
		}
	}
	for i := range decodeCacheMaxEntries + 10 {
		if !c.valid(fmt.Appendf(nil, `{"name":"n%d","version":"1"}`, i)) {
			t.Fatal("valid value refused")
		}
		if n := c.len(); n > decodeCacheMaxEntries {
			t.Fatalf("%d values kept, bound %d", n, decodeCacheMaxEntries)
		}
	}
}

// TestDecodeCacheAgreesWithSDK: for every input, valid says what
// json.Unmarshal into the SDK's type says, whether or not it was cached.
func TestDecodeCacheAgreesWithSDK(t *testing.T) {
	c := newDecodeCache[mcp.ClientCapabilities]()
	for _, in := range []string{
		`{}`, `{"roots":{"listChanged":true}}`, `{"roots":true}`, `{"sampling":{}}`, `{"elicitation":{"form":{}}}`,
		`{"experimental":{"x":{}}}`, `{"experimental":1}`, `{`, `null`, `{"roots":{"listChanged":"yes"}}`,
	} {
		want := json.Unmarshal([]byte(in), &mcp.ClientCapabilities{}) == nil
		for range 2 { // the second time from the cache, if kept
			if got := c.valid([]byte(in)); got != want {
				t.Errorf("valid(%s) = %v, json.Unmarshal says %v", in, got, want)
			}
		}
	}
}

func TestJSONStringIs(t *testing.T) {
	for _, tc := range []struct {
		raw, s string
		want   bool
	}{
		{`"2026-07-28"`, "2026-07-28", true},
		{`"2026-07-2\u0038"`, "2026-07-28", true}, // escaped: decoded
		{`"2026-07-28" `, "2026-07-28", true},
		{`"2025-11-25"`, "2026-07-28", false},
		{`2026`, "2026", false},
		{`"a"b"`, `a"b`, false}, // not JSON
		{`"a\"b"`, `a"b`, true},
		{`"` + "\xff" + `"`, "\xff", false}, // decodes to U+FFFD
		{``, "", false},
		{`null`, "2026-07-28", false},
	} {
		if got := jsonStringIs([]byte(tc.raw), tc.s); got != tc.want {
			t.Errorf("jsonStringIs(%s, %q) = %v, want %v", tc.raw, tc.s, got, tc.want)
		}
	}
}

func BenchmarkStatelessCallOK(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench-client","title":"Bench","version":"1.8.0"}}}}`)
	_, m, ok := parseBody(body)
	if !ok || m == nil {
		b.Fatal("body does not parse")
	}
	r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
	for k, v := range map[string]string{"Mcp-Protocol-Version": protocol2026, "Mcp-Method": "tools/call", "Mcp-Name": "up__echo"} {
		r.Header.Set(k, v)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !statelessCallOK(r, m, m.params(), protocol2026) {
			b.Fatal("refused")
		}
	}
}
