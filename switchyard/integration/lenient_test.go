package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/testutil/lenient"
)

// lenientConfig: one tenant whose policy allows the fixture's tool
// "allowed", prompt "greet" and resource test://allowed, and denies
// "denied", "secret" and test://denied.
const lenientConfig = `
call_timeout: 10s
upstreams:
  - name: lax
    url: %s
tenants:
  - name: t
    policy:
      upstreams: [lax]
      rules:
        - {effect: deny, kind: tools, pattern: "lax__denied"}
        - {effect: deny, kind: prompts, pattern: "lax__secret"}
        - {effect: deny, kind: resources, pattern: "test://denied"}
      default: allow
api_keys:
  - {tenant: t, principal: p, key_env: SY_TEST_LENIENT_KEY}
`

// postRaw sends one JSON-RPC request with the params members given as
// text (so that they can repeat a member), on c's 2025-11-25 session or,
// without one, statelessly at 2026-07-28 with the SEP-2575 _meta members
// added and the Mcp-Method / Mcp-Name headers set (name: the tool, prompt
// or URI; "" for none).
func postRaw(t *testing.T, c *keyClient, method, name, members string) *rawAnswer {
	t.Helper()
	if c.sid == "" {
		members += `,"_meta":` + meta2026
	}
	c.nextID++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, c.nextID, method, members)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", v2025)
	} else {
		req.Header.Set("Mcp-Protocol-Version", v2026)
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	return doRaw(t, req)
}

// TestIntegrationCaseVariantsRefused: the policy check and the upstream
// read the same message. The upstream here decodes requests with Go's
// encoding/json (case-insensitive member names, the last duplicate
// kept), so a request naming an allowed tool as "name" and a denied one
// as "Name" (or as a second "name") would run the denied one if the
// gateway forwarded it. Through every role (edge, router, worker,
// tenancy), in both protocol eras, on the federated and the passthrough
// view, for tools, prompts, resources and completion, and on the fast
// path (a tools/call) as on the SDK path: the client gets -32600 and the
// upstream runs nothing denied; the same requests without the second
// member run the allowed item, and the denied item asked for plainly is
// unknown (-32602).
func TestIntegrationCaseVariantsRefused(t *testing.T) {
	up := lenient.Start(t, lenient.Catalog{
		Tools: []string{"allowed", "denied"}, Prompts: []string{"greet", "secret"},
		Resources: []string{"test://allowed", "test://denied"},
	})
	key := mintKey(t)
	t.Setenv("SY_TEST_LENIENT_KEY", key)
	g := startGateway(t, loadConfig(t, fmt.Sprintf(lenientConfig, up.URL)))
	auth := "Bearer " + key
	eventually(t, 20*time.Second, func() error { // the fixture is catalogued
		names, _, err := listAll(t.Context(), connectKey(t, g.url+"/mcp", v2025, key, nil))
		if err != nil {
			return err
		}
		return hasAll(names, "lax__allowed")
	})

	type request struct {
		name, method, target string // target: the Mcp-Name value
		members              string
	}
	// Each view's names: federated ones carry the upstream's prefix; the
	// variant member carries what the upstream itself calls the denied item.
	views := []struct {
		path, prefix string
	}{{"/mcp", "lax__"}, {"/mcp/lax", ""}}
	for _, era := range []string{v2025, v2026} {
		for _, view := range views {
			t.Run(era+view.path, func(t *testing.T) {
				c := &keyClient{url: g.url + view.path, auth: auth}
				if era == v2025 {
					c = as2025Session(t, c.url, auth)
				}
				tool, prompt := view.prefix+"allowed", view.prefix+"greet"
				attacks := []request{
					{"tool name by case", "tools/call", tool, `"name":"` + tool + `","Name":"denied","arguments":{}`},
					{"tool name by case, prefixed", "tools/call", tool, `"name":"` + tool + `","NAME":"` + view.prefix + `denied","arguments":{}`},
					{"tool name twice", "tools/call", tool, `"name":"` + tool + `","arguments":{},"name":"denied"`},
					{"tool name escaped", "tools/call", tool, `"name":"` + tool + `","\u004eame":"denied"`},
					{"prompt name by case", "prompts/get", prompt, `"name":"` + prompt + `","Name":"secret"`},
					{"prompt name twice", "prompts/get", prompt, `"name":"` + prompt + `","name":"secret"`},
					{"resource uri by case", "resources/read", "test://allowed", `"uri":"test://allowed","URI":"test://denied"`},
					{"completion ref name by case", "completion/complete", "", `"ref":{"type":"ref/prompt","name":"` + prompt + `","Name":"secret"},"argument":{"name":"a","value":""}`},
				}
				for _, a := range attacks {
					before := len(up.Ran())
					ans := postRaw(t, c, a.method, a.target, a.members)
					e := ans.rpcErr(t)
					if ans.status != http.StatusBadRequest || e == nil || e.Code != -32600 || !strings.Contains(e.Message, "params.") {
						t.Errorf("%s: HTTP %d %s, want 400 and -32600", a.name, ans.status, ans.body)
					}
					if ran := up.Ran()[before:]; len(ran) != 0 {
						t.Errorf("%s: the upstream ran %v", a.name, ran)
					}
				}
				// The controls: the allowed items run, the denied ones are unknown.
				for _, ok := range []struct {
					method, target, members, ran string
				}{
					{"tools/call", tool, `"name":"` + tool + `","arguments":{}`, "tools/call allowed"},
					{"prompts/get", prompt, `"name":"` + prompt + `"`, "prompts/get greet"},
					{"resources/read", "test://allowed", `"uri":"test://allowed"`, "resources/read test://allowed"},
				} {
					before := len(up.Ran())
					ans := postRaw(t, c, ok.method, ok.target, ok.members)
					if e := ans.rpcErr(t); e != nil || ans.status != http.StatusOK {
						t.Errorf("%s: HTTP %d %s", ok.method, ans.status, ans.body)
					}
					if ran := up.Ran()[before:]; !slices.Equal(ran, []string{ok.ran}) {
						t.Errorf("%s: the upstream ran %v, want %s", ok.method, ran, ok.ran)
					}
				}
				denied := postRaw(t, c, "tools/call", view.prefix+"denied", `"name":"`+view.prefix+`denied","arguments":{}`)
				if e := denied.rpcErr(t); e == nil || e.Code != -32602 {
					t.Errorf("denied tool asked for plainly: HTTP %d %s, want -32602", denied.status, denied.body)
				}
			})
		}
	}
	for _, ran := range up.Ran() {
		if strings.Contains(ran, "denied") || strings.Contains(ran, "secret") {
			t.Fatalf("the upstream ran %q, which the tenant's policy denies (all: %v)", ran, up.Ran())
		}
	}
}
