package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// rpcFunc sends one request (name: the Mcp-Name header of a 2026 call)
// and returns its result or its JSON-RPC error.
type rpcFunc func(t *testing.T, method, name string, params map[string]any) (json.RawMessage, *rpcError)

// sdkRPC is an rpcFunc over a go-sdk session.
func sdkRPC(cs *mcp.ClientSession) rpcFunc {
	return func(t *testing.T, method, _ string, params map[string]any) (json.RawMessage, *rpcError) {
		t.Helper()
		return sdkCall(t, cs, method, params)
	}
}

// rawRPC is an rpcFunc over raw HTTP. An error carries the HTTP status it
// came with; an answer without a JSON-RPC response fails the test.
func rawRPC(c *keyClient) rpcFunc {
	return func(t *testing.T, method, name string, params map[string]any) (json.RawMessage, *rpcError) {
		t.Helper()
		a := c.call(t, method, name, params)
		if len(a.result) == 0 && len(a.err) == 0 {
			t.Fatalf("%s %v: no JSON-RPC answer: HTTP %d %s", method, params, a.status, a.body)
		}
		e := a.rpcErr(t)
		if e != nil {
			e.HTTP = a.status
		} else if a.status != http.StatusOK {
			t.Fatalf("%s %v: a result with HTTP %d", method, params, a.status)
		}
		return a.result, e
	}
}

// listShapes: the member of each list's result and the field naming an item.
var listShapes = map[string][2]string{
	"tools/list":               {"tools", "name"},
	"prompts/list":             {"prompts", "name"},
	"resources/list":           {"resources", "uri"},
	"resources/templates/list": {"resourceTemplates", "uriTemplate"},
}

// listItems pages through a list and returns the items' names (or URIs)
// sorted, and the first page's nextCursor.
func listItems(t *testing.T, f rpcFunc, method string) (items []string, firstCursor string, err *rpcError) {
	t.Helper()
	shape := listShapes[method]
	cursor := ""
	for page := 0; ; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, rerr := f(t, method, "", params)
		if rerr != nil {
			return nil, "", rerr
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(res, &m); err != nil {
			t.Fatalf("%s: %v: %s", method, err, res)
		}
		var list []map[string]any
		if len(m[shape[0]]) > 0 {
			if err := json.Unmarshal(m[shape[0]], &list); err != nil {
				t.Fatalf("%s: %v", method, err)
			}
		}
		for _, it := range list {
			items = append(items, fmt.Sprint(it[shape[1]]))
		}
		var next string
		if len(m["nextCursor"]) > 0 {
			_ = json.Unmarshal(m["nextCursor"], &next)
		}
		if page == 0 {
			firstCursor = next
		}
		if next == "" {
			break
		}
		if page > 1000 {
			t.Fatalf("%s: more than 1000 pages", method)
		}
		cursor = next
	}
	slices.Sort(items)
	return items, firstCursor, nil
}

// catalogOf is what an upstream or a tenant's view holds, by list method.
type catalogOf map[string][]string

func listCatalog(t *testing.T, f rpcFunc) catalogOf {
	t.Helper()
	c := catalogOf{}
	for method := range listShapes {
		items, _, err := listItems(t, f, method)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		c[method] = items
	}
	return c
}

// probe is one request about an item: the method, the Mcp-Name header and
// the params, for the item's name (or URI).
type probe struct {
	label  string
	method string
	params func(item string) (name string, params map[string]any)
}

var (
	probeToolCall = probe{"tools/call", "tools/call", func(n string) (string, map[string]any) {
		return n, map[string]any{"name": n, "arguments": map[string]any{}}
	}}
	probePromptGet = probe{"prompts/get", "prompts/get", func(n string) (string, map[string]any) {
		return n, map[string]any{"name": n, "arguments": map[string]any{"arg1": "x", "arg2": "y"}}
	}}
	probePromptComplete = probe{"completion/complete ref/prompt", "completion/complete", func(n string) (string, map[string]any) {
		return "", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": n}, "argument": map[string]any{"name": "arg1", "value": "x"}}
	}}
	probeRead = probe{"resources/read", "resources/read", func(u string) (string, map[string]any) {
		return u, map[string]any{"uri": u}
	}}
	probeSubscribe = probe{"resources/subscribe", "resources/subscribe", func(u string) (string, map[string]any) {
		return "", map[string]any{"uri": u}
	}}
	probeTemplateComplete = probe{"completion/complete ref/resource", "completion/complete", func(u string) (string, map[string]any) {
		return "", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": u}, "argument": map[string]any{"name": "id", "value": "1"}}
	}}
)

// sameAsGhost asks f about item and about ghost, a name that exists
// nowhere, with p, and fails unless both are JSON-RPC errors and item's is
// ghost's with the name replaced: the same code, and the same message and
// data byte for byte.
func sameAsGhost(t *testing.T, f rpcFunc, p probe, item, ghost string) {
	t.Helper()
	gname, gparams := p.params(ghost)
	_, want := f(t, p.method, gname, gparams)
	iname, iparams := p.params(item)
	res, got := f(t, p.method, iname, iparams)
	if want == nil {
		t.Fatalf("%s of the nonexistent %q succeeded", p.label, ghost)
	}
	if got == nil {
		t.Errorf("%s %q: succeeded (%.200s), want the answer to a nonexistent name: %s", p.label, item, res, want)
		return
	}
	want.Message = strings.ReplaceAll(want.Message, ghost, item)
	want.Data = bytes.ReplaceAll(want.Data, []byte(ghost), []byte(item))
	if got.HTTP != want.HTTP || got.Code != want.Code || got.Message != want.Message || !bytes.Equal(got.Data, want.Data) {
		t.Errorf("%s %q:\n got  %s\n want %s (the answer to nonexistent %q)", p.label, item, got, want, ghost)
	}
}

// Ghost names: items that no upstream has, in the shape of the real ones.
const (
	ghostTool     = "ev__zz_ghost_tool"
	ghostPrompt   = "ev__zz_ghost_prompt"
	ghostResource = "test://zz-ghost-resource"
	ghostTemplate = "test://zz-ghost/{id}/data"
)

// isolationConfig: tenant-a sees ev (the everything-server) with some
// tools, a prompt and a resource denied; tenant-b sees the fixture only.
// Neither is anonymous. page_size 1 makes every list page.
const isolationConfig = `
page_size: 1
call_timeout: 30s
upstreams:
  - name: ev
    url: %s
  - name: fixture
    url: %s
tenants:
  - name: tenant-a
    policy:
      upstreams: [ev]
      rules:
        - {effect: deny, kind: tools, pattern: "ev__test_error_*"}
        - {effect: deny, kind: tools, pattern: "*elicitation*"}
        - {effect: deny, kind: prompts, pattern: "ev__test_prompt_with_image"}
        - {effect: deny, kind: resources, pattern: "test://static-binary"}
      default: allow
  - name: tenant-b
    policy: {upstreams: [fixture], default: allow}
api_keys:
  - {tenant: tenant-a, principal: alice, key_env: SY_TEST_ALICE_KEY}
  - {tenant: tenant-b, principal: bob, key_env: SY_TEST_BOB_KEY}
`

// deniedForA reports whether tenant-a's rules deny item (of list method).
func deniedForA(method, item string) bool {
	switch method {
	case "tools/list":
		return strings.HasPrefix(item, "ev__test_error_") || strings.Contains(item, "elicitation")
	case "prompts/list":
		return item == "ev__test_prompt_with_image"
	case "resources/list":
		return item == "test://static-binary"
	}
	return false
}

// TestIntegrationTenantIsolation: tenants A and B, each with an API key,
// over two upstreams. Nothing of A is visible or usable to B on any
// method, in either protocol era: B's lists hold none of A's items, each
// of A's items (allowed or denied for A) answers B exactly as a name that
// exists nowhere, A's cursors, session ids and passthrough endpoint are
// unknown to B, and A's denied items answer A as nonexistent ones.
func TestIntegrationTenantIsolation(t *testing.T) {
	evURL, _ := startEverythingHTTP(t)
	fxURL, _ := startFixtureHTTP(t)
	alice, bob := mintKey(t), mintKey(t)
	t.Setenv("SY_TEST_ALICE_KEY", alice)
	t.Setenv("SY_TEST_BOB_KEY", bob)
	g := startGateway(t, loadConfig(t, fmt.Sprintf(isolationConfig, evURL, fxURL)))
	mcpURL := g.url + "/mcp"
	authA, authB := "Bearer "+alice, "Bearer "+bob

	// Everything A's upstream has, asked directly, with federated names.
	ev := listCatalog(t, sdkRPC(connect(t, evURL, v2025, nil)))
	for _, m := range []string{"tools/list", "prompts/list"} {
		for i, n := range ev[m] {
			ev[m][i] = "ev__" + n
		}
		slices.Sort(ev[m])
	}
	wantA, deniedA := catalogOf{}, catalogOf{}
	for m, items := range ev {
		for _, it := range items {
			if deniedForA(m, it) {
				deniedA[m] = append(deniedA[m], it)
			} else {
				wantA[m] = append(wantA[m], it)
			}
		}
	}
	for _, m := range []string{"tools/list", "prompts/list", "resources/list"} {
		if len(deniedA[m]) == 0 || len(wantA[m]) < 2 {
			t.Fatalf("everything-server changed: %s has %d denied and %d visible items for A", m, len(deniedA[m]), len(wantA[m]))
		}
	}
	if len(ev["resources/templates/list"]) == 0 {
		t.Fatal("everything-server has no resource templates")
	}
	wantB := catalogOf{"tools/list": {"fixture__big", "fixture__echo", "fixture__fail", "fixture__slow"},
		"prompts/list": nil, "resources/list": nil, "resources/templates/list": nil}

	sessA := connectKey(t, mcpURL, v2025, alice, nil)
	sessB := connectKey(t, mcpURL, v2025, bob, nil)
	eventually(t, 20*time.Second, func() error { // both upstreams catalogued
		for _, c := range []struct {
			cs   *mcp.ClientSession
			want []string
		}{{sessA, wantA["tools/list"]}, {sessB, wantB["tools/list"]}} {
			names, _, err := listAll(t.Context(), c.cs)
			if err != nil {
				return err
			}
			if !slices.Equal(sortedCopy(names), c.want) {
				return fmt.Errorf("tools %v, want %v", names, c.want)
			}
		}
		return nil
	})

	eras := []struct {
		name string
		a, b rpcFunc
	}{
		{v2025, sdkRPC(sessA), sdkRPC(sessB)},
		{v2026, rawRPC(&keyClient{url: mcpURL, auth: authA}), rawRPC(&keyClient{url: mcpURL, auth: authB})},
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			t.Run("lists", func(t *testing.T) {
				for _, c := range []struct {
					who  string
					f    rpcFunc
					want catalogOf
				}{{"A", era.a, wantA}, {"B", era.b, wantB}} {
					got := listCatalog(t, c.f)
					for m := range listShapes {
						if !slices.Equal(got[m], c.want[m]) {
							t.Errorf("%s's %s: %v, want %v", c.who, m, got[m], c.want[m])
						}
					}
				}
			})
			t.Run("A's items answer B as nonexistent ones", func(t *testing.T) {
				checkItemsUnknown(t, era.name, era.b, ev, true)
			})
			t.Run("A's denied items answer A as nonexistent ones", func(t *testing.T) {
				// Not resources/subscribe: A sees one resource upstream, so
				// the router forwards a URI it does not list to it (the
				// fallback of docs/policy.md, "One limit"), and the
				// everything-server accepts a subscription to any URI,
				// while a denied URI is refused by the router.
				checkItemsUnknown(t, era.name, era.a, deniedA, false)
			})
			t.Run("A's cursors are invalid for B", func(t *testing.T) {
				for m := range listShapes {
					_, cur, err := listItems(t, era.a, m)
					if err != nil {
						t.Fatal(err)
					}
					if cur == "" {
						continue // a list of one item (templates) has no cursor
					}
					_, garbage := era.b(t, m, "", map[string]any{"cursor": "garbage"})
					_, got := era.b(t, m, "", map[string]any{"cursor": cur})
					if garbage == nil || garbage.Code != -32602 {
						t.Fatalf("%s with a garbage cursor: %s, want -32602", m, garbage)
					}
					if got == nil || got.String() != garbage.String() {
						t.Errorf("%s with A's cursor as B: %s, want %s (a garbage cursor's answer)", m, got, garbage)
					}
					// And in another list of A's own: cursors are bound to the kind.
					other := "prompts/list"
					if m == other {
						other = "tools/list"
					}
					if _, got := era.a(t, other, "", map[string]any{"cursor": cur}); got == nil || got.String() != garbage.String() {
						t.Errorf("A's %s cursor in %s: %s, want %s", m, other, got, garbage)
					}
				}
			})
		})
	}

	t.Run("2026 subscription of A's resource as B", func(t *testing.T) {
		// A 2026-07-28 client subscribes on a subscriptions/listen stream:
		// Subscribe returns before the stream is set up, so what shows
		// isolation is the updates. The everything-server updates
		// test://watched-resource every 3 s; B subscribes first, A after,
		// and by A's second update B would have had one too.
		const watched = "test://watched-resource"
		if !slices.Contains(ev["resources/list"], watched) {
			t.Fatalf("everything-server has no %s", watched)
		}
		updates := func(ch chan string) *mcp.ClientOptions {
			return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				select {
				case ch <- r.Params.URI:
				default:
				}
			}}
		}
		bGot, aGot := make(chan string, 16), make(chan string, 16)
		b26 := connectKey(t, mcpURL, v2026, bob, updates(bGot))
		a26 := connectKey(t, mcpURL, v2026, alice, updates(aGot))
		if err := b26.Subscribe(t.Context(), &mcp.SubscribeParams{URI: watched}); err != nil {
			t.Logf("B's subscribe: %v", err)
		}
		if err := a26.Subscribe(t.Context(), &mcp.SubscribeParams{URI: watched}); err != nil {
			t.Fatalf("A's subscribe: %v", err)
		}
		for i := range 2 {
			select {
			case uri := <-aGot:
				if uri != watched {
					t.Fatalf("A got an update of %q", uri)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("A got %d updates of %s in 15 s, want 2", i, watched)
			}
		}
		select {
		case uri := <-bGot:
			t.Fatalf("B got an update of A's %s", uri)
		default:
		}
	})

	t.Run("logging/setLevel reaches only the tenant's upstreams", func(t *testing.T) {
		nc, err := nats.Connect("", nats.InProcessServer(g.ns))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		var mu sync.Mutex
		seen := map[string][]string{} // tenant -> upstreams asked
		sub, err := nc.Subscribe(proto.Prefix+"worker.*."+proto.OpLoggingSetLevel, func(m *nats.Msg) {
			var req proto.Request
			if proto.Unmarshal(m.Data, &req) == nil {
				mu.Lock()
				seen[req.Tenant] = append(seen[req.Tenant], req.Upstream)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		// logging/setLevel is a 2025-era method (2026-07-28 deprecates
		// logging, SEP-2577).
		for _, f := range []rpcFunc{eras[0].a, eras[0].b} {
			if _, err := f(t, "logging/setLevel", "", map[string]any{"level": "debug"}); err != nil {
				t.Fatalf("setLevel: %s", err)
			}
		}
		// Every fan-out request was published before the router answered;
		// a round trip on this connection delivers them all.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for tenant, want := range map[string]string{"tenant-a": "ev", "tenant-b": "fixture"} {
			ups := seen[tenant]
			if len(ups) != 1 || ups[0] != want {
				t.Errorf("%s's setLevel went to %v, want [%s]", tenant, ups, want)
			}
		}
	})

	t.Run("A's session is unknown to B", func(t *testing.T) {
		rawA := as2025Session(t, mcpURL, authA)
		const ghostSID = "ZZGHOSTSESSION0000000000000000"
		list := func(auth, sid string) *rawAnswer {
			return (&keyClient{url: mcpURL, auth: auth, sid: sid}).call(t, "tools/list", "", nil)
		}
		for _, sid := range []string{rawA.sid, sessA.ID()} {
			want := list(authB, ghostSID)
			got := list(authB, sid)
			if want.status != http.StatusNotFound {
				t.Fatalf("unknown session: HTTP %d %s, want 404", want.status, want.body)
			}
			if got.status != want.status || !bytes.Equal(got.body, want.body) {
				t.Errorf("A's session %s with B's key: HTTP %d %q, want HTTP %d %q (an unknown session's answer)", sid, got.status, got.body, want.status, want.body)
			}
			// The stream and the session's deletion are A's alone too.
			for _, method := range []string{http.MethodGet, http.MethodDelete} {
				want := doRaw(t, rawRequest(t, method, mcpURL, authB, "", "Mcp-Session-Id", ghostSID, "Mcp-Protocol-Version", v2025))
				got := doRaw(t, rawRequest(t, method, mcpURL, authB, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v2025))
				if want.status != http.StatusNotFound || got.status != want.status || !bytes.Equal(got.body, want.body) {
					t.Errorf("%s of A's session with B's key: HTTP %d %q, want HTTP 404 %q", method, got.status, got.body, want.body)
				}
			}
		}
		if a := list(authA, rawA.sid); a.status != http.StatusOK || len(a.result) == 0 {
			t.Errorf("A's own session after B's attempts: HTTP %d %s", a.status, a.body)
		}
		if _, err := sessA.ListTools(t.Context(), nil); err != nil {
			t.Errorf("A's go-sdk session after B's attempts: %v", err)
		}
	})

	t.Run("A's upstream endpoint is unknown to B", func(t *testing.T) {
		for _, tc := range []struct{ auth, path string }{
			{authA, "/mcp/ev"}, {authB, "/mcp/fixture"},
		} {
			if a := doRaw(t, rawRequest(t, http.MethodPost, g.url+tc.path, tc.auth, initBody)); a.status != http.StatusOK {
				t.Fatalf("own endpoint %s: HTTP %d %s", tc.path, a.status, a.body)
			}
		}
		// The 404 names the upstream asked for: compare with the name
		// replaced.
		const ghostUp = "zz-ghost-upstream"
		same := func(what string, got, want *rawAnswer) {
			t.Helper()
			wantBody := bytes.ReplaceAll(want.body, []byte(ghostUp), []byte("ev"))
			if want.status != http.StatusNotFound || got.status != want.status || !bytes.Equal(got.body, wantBody) {
				t.Errorf("%s on /mcp/ev as B: HTTP %d %q, want HTTP %d %q (an unknown upstream's answer)", what, got.status, got.body, want.status, wantBody)
			}
		}
		same("initialize",
			doRaw(t, rawRequest(t, http.MethodPost, g.url+"/mcp/ev", authB, initBody)),
			doRaw(t, rawRequest(t, http.MethodPost, g.url+"/mcp/"+ghostUp, authB, initBody)))
		same("2026 tools/list",
			(&keyClient{url: g.url + "/mcp/ev", auth: authB}).call(t, "tools/list", "", nil),
			(&keyClient{url: g.url + "/mcp/" + ghostUp, auth: authB}).call(t, "tools/list", "", nil))
		same("GET",
			doRaw(t, rawRequest(t, http.MethodGet, g.url+"/mcp/ev", authB, "")),
			doRaw(t, rawRequest(t, http.MethodGet, g.url+"/mcp/"+ghostUp, authB, "")))
	})

	t.Run("no credentials is 401 with resource metadata", func(t *testing.T) {
		for _, path := range []string{"/mcp", "/mcp/ev"} {
			for _, auth := range []string{"", "Bearer " + mintKey(t)} {
				a := doRaw(t, rawRequest(t, http.MethodPost, g.url+path, auth, initBody))
				wa := a.header.Get("WWW-Authenticate")
				meta := `resource_metadata="` + g.url + `/.well-known/oauth-protected-resource` + path + `"`
				if a.status != http.StatusUnauthorized || !strings.HasPrefix(wa, "Bearer ") || !strings.Contains(wa, meta) {
					t.Errorf("%s with auth %.12q: HTTP %d, WWW-Authenticate %q; want 401 with %s", path, auth, a.status, wa, meta)
				}
				if invalid := strings.Contains(wa, `error="invalid_token"`); invalid != (auth != "") {
					t.Errorf("%s with auth %.12q: WWW-Authenticate %q: invalid_token only for a refused credential", path, auth, wa)
				}
			}
		}
	})
}

// checkItemsUnknown asks f about every item of items (by list method) and
// checks each answer is a nonexistent name's.
// subscribe says whether to probe resources/subscribe too.
func checkItemsUnknown(t *testing.T, era string, f rpcFunc, items catalogOf, subscribe bool) {
	t.Helper()
	for _, n := range items["tools/list"] {
		sameAsGhost(t, f, probeToolCall, n, ghostTool)
	}
	for _, n := range items["prompts/list"] {
		sameAsGhost(t, f, probePromptGet, n, ghostPrompt)
		sameAsGhost(t, f, probePromptComplete, n, ghostPrompt)
	}
	for _, u := range items["resources/list"] {
		sameAsGhost(t, f, probeRead, u, ghostResource)
		if subscribe && era == v2025 { // 2026-07-28 subscribes on subscriptions/listen
			sameAsGhost(t, f, probeSubscribe, u, ghostResource)
		}
	}
	for _, tpl := range items["resources/templates/list"] {
		sameAsGhost(t, f, probeTemplateComplete, tpl, ghostTemplate)
		inst := strings.ReplaceAll(tpl, "{id}", "1")
		sameAsGhost(t, f, probeRead, inst, strings.ReplaceAll(ghostTemplate, "{id}", "1"))
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
