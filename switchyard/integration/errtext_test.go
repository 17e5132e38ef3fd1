package integration

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/testutil/lenient"
)

// goDetail matches Go's names for types and encoding/json's phrases for
// them, which no error a client sees may carry.
var goDetail = regexp.MustCompile(`\*?\b[a-z][a-z0-9]*\.[A-Z]\w+|Go value of type|Go struct field|map\[|interface \{\}|json: |unmarshal`)

// errTextConfig: an upstream that never answers (nothing listens on its
// port) beside one that does until the test stops it.
const errTextConfig = `
call_timeout: 10s
upstreams:
  - name: gone
    url: %s
  - name: lax
    url: %s
`

// TestIntegrationErrorTextNamesNoInternals: errors clients get from the
// whole gateway name no internal address (an upstream's URL, its host and
// port, NATS), no worker and no Go type: for an upstream that was never
// reachable (http://127.0.0.1:<closed port>), for one that stops while
// catalogued, and for params the SDK cannot decode, in both protocol eras,
// on the federated and the passthrough view. The upstream is named; why
// it is unavailable is a fixed phrase.
func TestIntegrationErrorTextNamesNoInternals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	goneURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	ln.Close()
	up := lenient.Start(t, lenient.Catalog{Tools: []string{"allowed"}, Prompts: []string{"greet"}})
	g := startGateway(t, loadConfig(t, fmt.Sprintf(errTextConfig, goneURL, up.URL)))
	eventually(t, 20*time.Second, func() error {
		names, _, err := listAll(t.Context(), connect(t, g.url+"/mcp", v2025, nil))
		if err != nil {
			return err
		}
		return hasAll(names, "lax__allowed")
	})
	leaks := []string{"127.0.0.1", fmt.Sprint(port), goneURL, up.URL, strings.TrimPrefix(up.URL, "http://"), "http://", "nats://", "worker-", "msgpack"}
	check := func(t *testing.T, what string, a *rawAnswer) {
		t.Helper()
		e := a.rpcErr(t)
		if e == nil {
			t.Fatalf("%s: HTTP %d %s: no error", what, a.status, a.body)
		}
		text := e.Message + " " + string(e.Data)
		t.Logf("%s: %d %s", what, e.Code, text)
		if goDetail.MatchString(text) {
			t.Errorf("%s: %q names Go types", what, text)
		}
		for _, l := range leaks {
			if strings.Contains(text, l) {
				t.Errorf("%s: %q contains %q", what, text, l)
			}
		}
	}
	type request struct {
		what, path, method, target, members string
		want                                string // a part of the message
	}
	down := []request{
		{"tool of the unreachable upstream", "/mcp", "tools/call", "gone__x", `"name":"gone__x","arguments":{}`, "upstream gone is unavailable (connection refused)"},
		{"tool on its passthrough view", "/mcp/gone", "tools/call", "x", `"name":"x","arguments":{}`, "upstream gone is unavailable (connection refused)"},
		{"prompt of the unreachable upstream", "/mcp", "prompts/get", "gone__p", `"name":"gone__p"`, ""},
		{"list on its passthrough view", "/mcp/gone", "prompts/list", "", `"cursor":"x"`, ""},
		{"undecodable prompt name", "/mcp", "prompts/get", "lax__greet", `"name":5`, ""},
		{"undecodable prompt arguments", "/mcp/lax", "prompts/get", "greet", `"name":"greet","arguments":{"a":5}`, "Invalid params: params.arguments.a must be a string"},
	}
	run := func(t *testing.T, reqs []request) {
		for _, era := range []string{v2025, v2026} {
			for _, r := range reqs {
				c := &keyClient{url: g.url + r.path}
				if era == v2025 {
					c = as2025Session(t, c.url, "")
				}
				a := postRaw(t, c, r.method, r.target, r.members)
				check(t, era+" "+r.what, a)
				// At 2026-07-28 the SDK checks Mcp-Name against params it
				// cannot decode first (-32020), in the same terms.
				sdkFirst := era == v2026 && strings.HasPrefix(r.want, "Invalid params")
				if e := a.rpcErr(t); r.want != "" && !sdkFirst && !strings.Contains(e.Message, r.want) {
					t.Errorf("%s %s: %q, want %q", era, r.what, e.Message, r.want)
				}
			}
		}
	}
	t.Run("never reachable", func(t *testing.T) { run(t, down) })
	t.Run("stopped", func(t *testing.T) {
		up.Close()
		run(t, []request{
			{"tool of the stopped upstream", "/mcp", "tools/call", "lax__allowed", `"name":"lax__allowed","arguments":{}`, "upstream lax is unavailable ("},
			{"prompt of the stopped upstream", "/mcp/lax", "prompts/get", "greet", `"name":"greet"`, "upstream lax is unavailable ("},
		})
	})
}
