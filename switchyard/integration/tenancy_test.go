package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
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
	probeUnsubscribe = probe{"resources/unsubscribe", "resources/unsubscribe", func(u string) (string, map[string]any) {
		return "", map[string]any{"uri": u}
	}}
	probeResourceComplete = probe{"completion/complete ref/resource", "completion/complete", func(u string) (string, map[string]any) {
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
// Tools and prompts get the view's prefix ("ev__" in the federated view).
const (
	ghostTool     = "zz_ghost_tool"
	ghostPrompt   = "zz_ghost_prompt"
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
  - {tenant: tenant-a, principal: alan, key_file: %s}
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
	alice, alan, bob := mintKey(t), mintKey(t), mintKey(t) // alan: another principal of A
	t.Setenv("SY_TEST_ALICE_KEY", alice)
	t.Setenv("SY_TEST_BOB_KEY", bob)
	alanFile := t.TempDir() + "/alan.key"
	if err := writeFile(alanFile, alan); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, loadConfig(t, fmt.Sprintf(isolationConfig, evURL, fxURL, alanFile)))
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

	// Each era has A and B on /mcp, A on its passthrough view /mcp/ev
	// and B on its own, /mcp/fixture.
	eras := []struct {
		name         string
		a, b         rpcFunc
		aPass, bPass rpcFunc
	}{
		{v2025, sdkRPC(sessA), sdkRPC(sessB),
			sdkRPC(connectKey(t, g.url+"/mcp/ev", v2025, alice, nil)), sdkRPC(connectKey(t, g.url+"/mcp/fixture", v2025, bob, nil))},
		{v2026, rawRPC(&keyClient{url: mcpURL, auth: authA}), rawRPC(&keyClient{url: mcpURL, auth: authB}),
			rawRPC(&keyClient{url: g.url + "/mcp/ev", auth: authA}), rawRPC(&keyClient{url: g.url + "/mcp/fixture", auth: authB})},
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			t.Run("lists", func(t *testing.T) {
				for _, c := range []struct {
					who  string
					f    rpcFunc
					want catalogOf
				}{{"A", era.a, wantA}, {"B", era.b, wantB},
					{"A on /mcp/ev", era.aPass, unprefixed(wantA, "ev__")}, {"B on /mcp/fixture", era.bPass, unprefixed(wantB, "fixture__")}} {
					got := listCatalog(t, c.f)
					for m := range listShapes {
						if !slices.Equal(got[m], c.want[m]) {
							t.Errorf("%s's %s: %v, want %v", c.who, m, got[m], c.want[m])
						}
					}
				}
			})
			t.Run("A's items answer B as nonexistent ones", func(t *testing.T) {
				checkItemsUnknown(t, era.name, era.b, ev, "ev__", true)
				checkItemsUnknown(t, era.name, era.bPass, unprefixed(ev, "ev__"), "", true)
			})
			t.Run("A's denied items answer A as nonexistent ones", func(t *testing.T) {
				// Not resources/subscribe: A sees one resource upstream, so
				// the router forwards a URI it does not list to it (the
				// fallback of docs/policy.md, "One limit"), and the
				// everything-server accepts a subscription to any URI,
				// while a denied URI is refused by the router.
				checkItemsUnknown(t, era.name, era.a, deniedA, "ev__", false)
				checkItemsUnknown(t, era.name, era.aPass, unprefixed(deniedA, "ev__"), "", false)
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
					// And in another view: cursors are bound to the view.
					_, passCur, err := listItems(t, era.aPass, m)
					if err != nil || passCur == "" {
						t.Fatalf("A's %s on /mcp/ev: cursor %q, %s", m, passCur, err)
					}
					for _, c := range []struct {
						what string
						f    rpcFunc
						cur  string
					}{
						{"A's /mcp cursor on /mcp/ev", era.aPass, cur},
						{"A's /mcp/ev cursor on /mcp", era.a, passCur},
						{"A's /mcp/ev cursor as B on /mcp", era.b, passCur},
						{"A's /mcp/ev cursor as B on /mcp/fixture", era.bPass, passCur},
					} {
						if _, got := c.f(t, m, "", map[string]any{"cursor": c.cur}); got == nil || got.String() != garbage.String() {
							t.Errorf("%s in %s: %s, want %s", c.what, m, got, garbage)
						}
					}
				}
			})
		})
	}

	t.Run("A's denied resource answers A's resources/subscribe as a nonexistent one", func(t *testing.T) {
		// A sees one resource upstream, but its policy restricts
		// resources, so the router forwards no unlisted URI there (the
		// everything-server would accept a subscription to any URI, and
		// that answer would tell a denied URI from a nonexistent one):
		// both get the router's Resource not found (docs/policy.md).
		for _, f := range []rpcFunc{eras[0].a, eras[0].aPass} {
			for _, u := range deniedA["resources/list"] {
				_, ghostErr := f(t, "resources/subscribe", "", map[string]any{"uri": ghostResource})
				_, deniedErr := f(t, "resources/subscribe", "", map[string]any{"uri": u})
				if ghostErr != nil {
					ghostErr.Message = strings.ReplaceAll(ghostErr.Message, ghostResource, u)
					ghostErr.Data = bytes.ReplaceAll(ghostErr.Data, []byte(ghostResource), []byte(u))
				}
				if deniedErr.String() != ghostErr.String() {
					t.Errorf("resources/subscribe of the denied %s: %s; of the nonexistent %s: %s", u, deniedErr, ghostResource, ghostErr)
				}
			}
		}
	})

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
		nc := g.connect(t, proto.IdentityWorker) // workers may read the worker subjects
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
			// B, and another principal of A's own tenant.
			for _, auth := range []string{authB, "Bearer " + alan} {
				want := list(auth, ghostSID)
				got := list(auth, sid)
				if want.status != http.StatusNotFound {
					t.Fatalf("unknown session: HTTP %d %s, want 404", want.status, want.body)
				}
				if got.status != want.status || !bytes.Equal(got.body, want.body) {
					t.Errorf("A's session %s with %.12s...: HTTP %d %q, want HTTP %d %q (an unknown session's answer)", sid, auth, got.status, got.body, want.status, want.body)
				}
			}
			if got := list("", sid); got.status != http.StatusUnauthorized {
				t.Errorf("A's session without credentials: HTTP %d %q, want 401", got.status, got.body)
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
		same("legacy SSE GET /sse/ev",
			doRaw(t, rawRequest(t, http.MethodGet, g.url+"/sse/ev", authB, "")),
			doRaw(t, rawRequest(t, http.MethodGet, g.url+"/sse/"+ghostUp, authB, "")))
	})

	t.Run("no credentials is 401 with resource metadata", func(t *testing.T) {
		for _, path := range []string{"/mcp", "/mcp/ev", "/sse", "/sse/ev"} {
			for _, auth := range []string{"", "Bearer " + mintKey(t)} {
				method, body := http.MethodPost, initBody
				if strings.HasPrefix(path, "/sse") {
					method, body = http.MethodGet, ""
				}
				a := doRaw(t, rawRequest(t, method, g.url+path, auth, body))
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
// checks each answer is a nonexistent name's. prefix is the view's prefix
// of tool and prompt names ("ev__" federated, "" in a passthrough view);
// subscribe says whether to probe resources/subscribe and unsubscribe too
// (2025-11-25 only: 2026-07-28 subscribes on subscriptions/listen).
func checkItemsUnknown(t *testing.T, era string, f rpcFunc, items catalogOf, prefix string, subscribe bool) {
	t.Helper()
	for _, n := range items["tools/list"] {
		sameAsGhost(t, f, probeToolCall, n, prefix+ghostTool)
	}
	for _, n := range items["prompts/list"] {
		sameAsGhost(t, f, probePromptGet, n, prefix+ghostPrompt)
		sameAsGhost(t, f, probePromptComplete, n, prefix+ghostPrompt)
	}
	for _, u := range items["resources/list"] {
		sameAsGhost(t, f, probeRead, u, ghostResource)
		sameAsGhost(t, f, probeResourceComplete, u, ghostResource)
		if subscribe && era == v2025 {
			sameAsGhost(t, f, probeSubscribe, u, ghostResource)
			sameAsGhost(t, f, probeUnsubscribe, u, ghostResource)
		}
	}
	for _, tpl := range items["resources/templates/list"] {
		sameAsGhost(t, f, probeResourceComplete, tpl, ghostTemplate)
		inst := strings.ReplaceAll(tpl, "{id}", "1")
		sameAsGhost(t, f, probeRead, inst, strings.ReplaceAll(ghostTemplate, "{id}", "1"))
	}
}

// unprefixed is c with the prefix cut from tool and prompt names: the
// names of a passthrough view.
func unprefixed(c catalogOf, prefix string) catalogOf {
	out := catalogOf{}
	for m, items := range c {
		for _, it := range items {
			if m == "tools/list" || m == "prompts/list" {
				it = strings.TrimPrefix(it, prefix)
			}
			out[m] = append(out[m], it)
		}
		slices.Sort(out[m])
	}
	return out
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestIntegrationTenancyLiveChange runs every role as its own process,
// with two edges, creates a tenant and its keys through the admin service
// (the CLI), and shows that a live change takes effect on both edges in
// under a second of the admin's reply: (a) a deny rule added for a tool
// being called removes it from tools/list and makes tools/call answer
// exactly as for an unknown tool; (b) a revoked key gets 401 on new
// requests and its open sessions stop. It polls every 20 ms and logs the
// measured delays.
func TestIntegrationTenancyLiveChange(t *testing.T) {
	fxURL, _ := startFixtureHTTP(t)
	d := startDeployment(t, fmt.Sprintf(`
call_timeout: 30s
worker:
  heartbeat_interval: 200ms
tenants: []
upstreams:
  - name: fixture
    url: %s
`, fxURL), 2)
	mcp1, mcp2 := d.edges[0]+"/mcp", d.edges[1]+"/mcp"

	// The tenant and its keys come from the admin service, through the CLI.
	d.cli(t, "tenant", "put", "--name", "live", "--upstream", "fixture", "--default", "allow")
	key1 := strings.TrimSpace(d.cli(t, "key", "create", "--tenant", "live", "--principal", "p1"))
	key2 := strings.TrimSpace(d.cli(t, "key", "create", "--tenant", "live", "--principal", "p2"))
	id1, _, ok := apikey.Parse(key1)
	if !ok {
		t.Fatalf("key create printed %q, not a key", key1)
	}
	var keys tenancy.KeyListReply
	if err := json.Unmarshal([]byte(d.cli(t, "key", "list", "--tenant", "live", "--json")), &keys); err != nil || len(keys.Keys) != 2 {
		t.Fatalf("key list: %v %+v", err, keys)
	}

	nc, err := nats.Connect(d.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// The deployment serves the tenant: p1 holds a go-sdk session on
	// edge 1, p2 calls statelessly (2026-07-28) on both edges.
	// Both sessions say when their tool list changes: sess1's tenant
	// gets a deny rule below, bystander's tenant ("other") does not.
	changed1, changedOther := make(chan struct{}, 16), make(chan struct{}, 16)
	onChange := func(ch chan struct{}) *mcp.ClientOptions {
		return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}}
	}
	d.cli(t, "tenant", "put", "--name", "other", "--all-upstreams", "--default", "allow")
	keyOther := strings.TrimSpace(d.cli(t, "key", "create", "--tenant", "other", "--principal", "o"))
	var sess1, bystander *mcp.ClientSession
	eventually(t, 30*time.Second, func() error {
		cs, err := dialKey(t.Context(), mcp1, v2025, keyOther, onChange(changedOther))
		if err != nil {
			return err
		}
		names, _, err := listAll(t.Context(), cs)
		if err == nil {
			err = hasAll(names, "fixture__echo")
		}
		if err != nil {
			_ = cs.Close()
			return err
		}
		bystander = cs
		return nil
	})
	t.Cleanup(func() { _ = bystander.Close() })
	eventually(t, 30*time.Second, func() error {
		cs, err := dialKey(t.Context(), mcp1, v2025, key1, onChange(changed1))
		if err != nil {
			return err
		}
		names, _, err := listAll(t.Context(), cs)
		if err == nil {
			err = hasAll(names, "fixture__echo", "fixture__fail")
		}
		if err != nil {
			_ = cs.Close()
			return err
		}
		sess1 = cs
		return nil
	})
	t.Cleanup(func() { _ = sess1.Close() })
	p2 := []*keyClient{{url: mcp1, auth: "Bearer " + key2}, {url: mcp2, auth: "Bearer " + key2}}
	echo := func(c *keyClient, name string) *rawAnswer {
		return c.call(t, "tools/call", name, map[string]any{"name": name, "arguments": map[string]any{"text": "x"}})
	}
	for _, c := range p2 {
		if a := echo(c, "fixture__echo"); a.status != http.StatusOK || len(a.result) == 0 {
			t.Fatalf("p2's call on %s: HTTP %d %s", c.url, a.status, a.body)
		}
	}
	const ghost = "fixture__zz_ghost"
	unknown := echo(p2[0], ghost).rpcErr(t)
	if unknown == nil || unknown.Code != -32602 {
		t.Fatalf("unknown tool: %s", unknown)
	}

	t.Run("deny rule", func(t *testing.T) {
		// p1 calls fixture__echo in a loop until the rule is in effect.
		type attempt struct {
			start time.Time
			err   error
		}
		var (
			mu       sync.Mutex
			attempts []attempt
		)
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, err := sess1.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "loop"}})
				mu.Lock()
				attempts = append(attempts, attempt{start, err})
				mu.Unlock()
			}
		}()
		stopLoop := sync.OnceFunc(func() { close(stop); <-stopped })
		defer stopLoop()
		eventually(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(attempts) == 0 || attempts[len(attempts)-1].err != nil {
				return fmt.Errorf("p1's calls: %d, last %v", len(attempts), attempts)
			}
			return nil
		})

		var info tenancy.TenantInfo
		adminRequest(t, nc, tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: "live"}, &info)
		tn := info.Tenant
		tn.Policy.Rules = append([]policy.Rule{{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "fixture__echo"}}, tn.Policy.Rules...)
		for _, ch := range []chan struct{}{changed1, changedOther} {
			for len(ch) > 0 {
				<-ch
			}
		}
		var put tenancy.TenantPutReply
		replied := adminRequest(t, nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn, Revision: info.Revision}, &put)

		want := *unknown
		want.Message = strings.ReplaceAll(want.Message, ghost, "fixture__echo")
		delay := inEffectWithin(t, replied, 10*time.Second, func() error {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			names, _, err := listAll(ctx, sess1)
			if err != nil {
				return err
			}
			if slices.Contains(names, "fixture__echo") {
				return fmt.Errorf("tools/list on edge 1 still has fixture__echo: %v", names)
			}
			for _, c := range p2 {
				if got := echo(c, "fixture__echo").rpcErr(t); got == nil || got.String() != want.String() {
					return fmt.Errorf("tools/call fixture__echo on %s: %s, want %s", c.url, got, &want)
				}
				if names, _, err := listItems(t, rawRPC(c), "tools/list"); err != nil || slices.Contains(names, "fixture__echo") {
					return fmt.Errorf("tools/list on %s: %v %s", c.url, names, err)
				}
			}
			return nil
		})
		effective := replied.Add(delay)
		select {
		case <-changed1:
		case <-time.After(10 * time.Second):
			t.Error("no notifications/tools/list_changed for the tenant whose policy changed")
		}
		select {
		case <-changedOther:
			t.Error("notifications/tools/list_changed for another tenant")
		default:
		}
		t.Logf("deny rule: in effect on both edges %s after the admin reply (tools/list and tools/call, polled every 20 ms)", delay.Round(time.Millisecond))
		if delay >= time.Second {
			t.Errorf("deny rule took %s to take effect, want under 1 s", delay)
		}

		// The loop's calls that started once the rule was seen in effect
		// answered as an unknown tool; the other tools still work.
		eventually(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if n := len(attempts); n == 0 || !attempts[n-1].start.After(effective) {
				return errors.New("the loop made no call since the rule took effect")
			}
			return nil
		})
		stopLoop()
		var after int
		for _, a := range attempts {
			if a.start.After(effective) {
				after++
				var je *jsonrpc.Error
				if !errors.As(a.err, &je) || je.Code != want.Code || je.Message != want.Message {
					t.Errorf("a call of the denied tool: %v", a.err)
				}
			}
		}
		t.Logf("deny rule: the loop made %d calls before the rule was seen in effect, %d after", len(attempts)-after, after)
		res, err := sess1.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__fail", Arguments: map[string]any{"reason": "still here"}})
		if err != nil || !res.IsError {
			t.Errorf("fixture__fail after the deny rule: %v %+v", err, res)
		}
	})

	t.Run("key revocation", func(t *testing.T) {
		// p1's open sessions: the go-sdk one on edge 1, a raw one on edge 2.
		raw1 := as2025Session(t, mcp2, "Bearer "+key1)
		fresh1 := []*keyClient{{url: mcp1, auth: "Bearer " + key1}, {url: mcp2, auth: "Bearer " + key1}}
		for _, c := range append([]*keyClient{raw1}, fresh1...) {
			if a := c.call(t, "tools/list", "", nil); a.status != http.StatusOK {
				t.Fatalf("before revocation: HTTP %d %s", a.status, a.body)
			}
		}
		var info tenancy.KeyInfo
		replied := adminRequest(t, nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: id1}, &info)
		if !info.Revoked {
			t.Fatalf("key.revoke: %+v", info)
		}
		delay := inEffectWithin(t, replied, 10*time.Second, func() error {
			for _, c := range fresh1 {
				if a := c.call(t, "tools/list", "", nil); a.status != http.StatusUnauthorized {
					return fmt.Errorf("a new request with the key on %s: HTTP %d %s", c.url, a.status, a.body)
				}
			}
			if a := raw1.call(t, "tools/list", "", nil); a.status != http.StatusUnauthorized && a.status != http.StatusNotFound {
				return fmt.Errorf("the key's open session on edge 2: HTTP %d %s", a.status, a.body)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if _, err := sess1.ListTools(ctx, nil); err == nil {
				return errors.New("the key's go-sdk session on edge 1 still lists tools")
			}
			return nil
		})
		t.Logf("key revocation: in effect on both edges %s after the admin reply (new requests and open sessions, polled every 20 ms)", delay.Round(time.Millisecond))
		if delay >= time.Second {
			t.Errorf("key revocation took %s to take effect, want under 1 s", delay)
		}
		a := fresh1[0].call(t, "tools/list", "", nil)
		if wa := a.header.Get("WWW-Authenticate"); !strings.Contains(wa, `error="invalid_token"`) {
			t.Errorf("revoked key: WWW-Authenticate %q", wa)
		}
		for _, c := range p2 {
			if a := echo(c, "fixture__fail"); a.status != http.StatusOK || len(a.result) == 0 {
				t.Errorf("the tenant's other key on %s after the revocation: HTTP %d %s", c.url, a.status, a.body)
			}
		}
	})

	t.Run("tenant deletion", func(t *testing.T) {
		raw2 := as2025Session(t, mcp1, "Bearer "+key2)
		var rep tenancy.TenantDeleteReply
		replied := adminRequest(t, nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: "live"}, &rep)
		if rep.KeysDeleted != 2 {
			t.Errorf("tenant.delete: %+v, want its 2 keys deleted", rep)
		}
		delay := inEffectWithin(t, replied, 10*time.Second, func() error {
			for _, c := range p2 {
				if a := c.call(t, "tools/list", "", nil); a.status != http.StatusUnauthorized {
					return fmt.Errorf("a request with the tenant's key on %s: HTTP %d %s", c.url, a.status, a.body)
				}
			}
			if a := raw2.call(t, "tools/list", "", nil); a.status != http.StatusUnauthorized && a.status != http.StatusNotFound {
				return fmt.Errorf("an open session of the tenant: HTTP %d %s", a.status, a.body)
			}
			return nil
		})
		t.Logf("tenant deletion: in effect on both edges %s after the admin reply", delay.Round(time.Millisecond))
		if delay >= time.Second {
			t.Errorf("tenant deletion took %s to take effect, want under 1 s", delay)
		}
	})
}

// limitData is the data of a -32069 refusal.
type limitData struct {
	Limit        string `json:"limit"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

// refusal decodes a -32069 refusal from e; ok is false for anything else.
func refusal(e *rpcError) (d limitData, ok bool) {
	if e == nil || e.Code != int64(proto.CodeLimited) || json.Unmarshal(e.Data, &d) != nil {
		return d, false
	}
	return d, true
}

// callEcho is a 2026-07-28 tools/call of fixture__echo.
func callEcho(t *testing.T, c *keyClient) *rawAnswer {
	t.Helper()
	return c.call(t, "tools/call", "fixture__echo", map[string]any{"name": "fixture__echo", "arguments": map[string]any{"text": "x"}})
}

// TestIntegrationTenantLimits: a tenant's rate and burst, a principal's,
// and a tenant's calls in flight, enforced at the edge: over a limit the
// request is refused at once with -32069 and {limit, retryAfterMs}, and
// nothing is queued.
func TestIntegrationTenantLimits(t *testing.T) {
	fxURL, _ := startFixtureHTTP(t)
	keys := map[string]string{}
	for _, n := range []string{"RATED", "P1", "P2", "CAPPED"} {
		keys[n] = mintKey(t)
		t.Setenv("SY_TEST_"+n+"_KEY", keys[n])
	}
	// One key comes from a file, as a mounted secret would.
	p1File := t.TempDir() + "/p1.key"
	if err := writeFile(p1File, keys["P1"]+"\n"); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, loadConfig(t, fmt.Sprintf(`
call_timeout: 30s
upstreams:
  - name: fixture
    url: %s
tenants:
  - name: rated
    policy: {all_upstreams: true, default: allow}
    limits: {rate: 0.01, burst: 3}
  - name: per-principal
    policy: {all_upstreams: true, default: allow}
    limits: {principal_rate: 0.01, principal_burst: 2}
  - name: capped
    policy: {all_upstreams: true, default: allow}
    limits: {max_in_flight: 2}
api_keys:
  - {tenant: rated, principal: r1, key_env: SY_TEST_RATED_KEY}
  - {tenant: per-principal, principal: p1, key_file: %s}
  - {tenant: per-principal, principal: p2, key_env: SY_TEST_P2_KEY}
  - {tenant: capped, principal: c1, key_env: SY_TEST_CAPPED_KEY}
`, fxURL, p1File)))
	mcpURL := g.url + "/mcp"
	client := func(name string) *keyClient { return &keyClient{url: mcpURL, auth: "Bearer " + keys[name]} }

	// The catalog is ready: asked by the tenant without rate limits.
	capped := client("CAPPED")
	eventually(t, 20*time.Second, func() error {
		if a := callEcho(t, capped); len(a.result) == 0 {
			return fmt.Errorf("HTTP %d %s", a.status, a.body)
		}
		return nil
	})

	t.Run("tenant rate", func(t *testing.T) {
		rated := client("RATED")
		for i := range 3 { // the burst
			if a := callEcho(t, rated); len(a.result) == 0 {
				t.Fatalf("call %d of a burst of 3: HTTP %d %s", i+1, a.status, a.body)
			}
		}
		// Refusals take no token: each one is refused the same way.
		for range 3 {
			a := callEcho(t, rated)
			d, ok := refusal(a.rpcErr(t))
			if !ok || d.Limit != "tenant_rate" || d.RetryAfterMs < 1 || d.RetryAfterMs > 100_000 {
				t.Fatalf("beyond the burst: HTTP %d %s, want -32069 tenant_rate with retryAfterMs in (0, 100 s]", a.status, a.body)
			}
			if ra := a.header.Get("Retry-After"); ra == "" || ra == "0" {
				t.Errorf("Retry-After %q on a refusal", ra)
			}
		}
		// Opening a 2025-era session takes a token too: refused the
		// same way, HTTP 429 with Retry-After, and no session.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, mcpURL, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v2025+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+keys["RATED"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var init struct{ Error *rpcError }
		_ = json.Unmarshal(body, &init)
		if d, ok := refusal(init.Error); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			resp.Header.Get("Mcp-Session-Id") != "" || !ok || d.Limit != "tenant_rate" {
			t.Fatalf("2025 session beyond the burst: HTTP %d %v %s", resp.StatusCode, resp.Header, body)
		}
		// Other tenants are not affected.
		if a := callEcho(t, capped); len(a.result) == 0 {
			t.Fatalf("another tenant: HTTP %d %s", a.status, a.body)
		}
	})

	t.Run("principal rate", func(t *testing.T) {
		for _, p := range []string{"P1", "P2"} {
			c := client(p)
			for i := range 2 {
				if a := callEcho(t, c); len(a.result) == 0 {
					t.Fatalf("%s call %d of a burst of 2: HTTP %d %s", p, i+1, a.status, a.body)
				}
			}
			a := callEcho(t, c)
			if d, ok := refusal(a.rpcErr(t)); !ok || d.Limit != "principal_rate" || d.RetryAfterMs < 1 {
				t.Fatalf("%s beyond its burst: HTTP %d %s, want -32069 principal_rate", p, a.status, a.body)
			}
		}
	})

	t.Run("in flight", func(t *testing.T) {
		// Two slow calls hold the tenant's two slots; a go-sdk session
		// cancels them (notifications/cancelled) at the end. They are in
		// flight once a worker has them: watch the workers' subjects.
		// (Routed calls on the worker subjects, granted ones on the grant
		// subjects; workers may read both.)
		nc := g.connect(t, proto.IdentityWorker)
		reached := make(chan string, 16)
		for _, kind := range []string{"worker", "grant"} {
			sub, err := nc.Subscribe(proto.Prefix+kind+".*."+proto.OpToolsCall, func(m *nats.Msg) {
				var req proto.Request
				if proto.Unmarshal(m.Data, &req) == nil && req.Tenant == "capped" && req.Name == "slow" {
					reached <- req.Name
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		cs := connectKey(t, mcpURL, v2025, keys["CAPPED"], nil)
		// The session's upstream session is opened by a first call, so
		// that the cancellations below do not land in its handshake (a
		// call cancelled there keeps the worker busy for many seconds:
		// reported to the upstream-worker's owner).
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "warm"}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fixture__slow", Arguments: map[string]any{"ms": 60_000}})
				done <- err
			}()
		}
		for range 2 {
			select {
			case name := <-reached:
				if name != "slow" {
					t.Fatalf("a worker got %q", name)
				}
			case err := <-done:
				t.Fatalf("a slow call ended: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("the slow calls did not reach a worker in 20 s")
			}
		}
		// A third call is refused at once, while both are still running.
		a := callEcho(t, capped)
		got, ok := refusal(a.rpcErr(t))
		if !ok || got.Limit != "in_flight" || got.RetryAfterMs != 100 {
			t.Fatalf("third call: HTTP %d %.300s, want -32069 in_flight with retryAfterMs 100", a.status, a.body)
		}
		select {
		case err := <-done:
			t.Fatalf("a slow call ended before the refusal came back: %v", err)
		default:
		}
		// Refused on a 2025-era session too.
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "x"}})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != int64(proto.CodeLimited) {
			t.Fatalf("session call while 2 are in flight: %v", err)
		}
		cancel()
		for range 2 {
			if err := <-done; err == nil {
				t.Fatal("a cancelled slow call succeeded")
			}
		}
		// The slots come back once the cancelled calls end.
		eventually(t, 20*time.Second, func() error {
			if a := callEcho(t, capped); len(a.result) == 0 {
				return fmt.Errorf("HTTP %d %s", a.status, a.body)
			}
			return nil
		})
	})
}

// TestIntegrationTenantLimitsFleet: with two edges (separate processes),
// each enforces its share of the tenant's limits, so the fleet admits the
// tenant's burst and in-flight cap, not twice them (docs/limits.md).
func TestIntegrationTenantLimitsFleet(t *testing.T) {
	fxURL, _ := startFixtureHTTP(t)
	keys := map[string]string{}
	dir := t.TempDir()
	for _, n := range []string{"free", "rated", "capped"} {
		keys[n] = mintKey(t)
		if err := writeFile(dir+"/"+n+".key", keys[n]); err != nil {
			t.Fatal(err)
		}
	}
	d := startDeployment(t, fmt.Sprintf(`
call_timeout: 30s
worker:
  heartbeat_interval: 200ms
upstreams:
  - name: fixture
    url: %[1]s
tenants:
  - name: free
    policy: {all_upstreams: true, default: allow}
  - name: rated
    policy: {all_upstreams: true, default: allow}
    limits: {rate: 0.01, burst: 4}
  - name: capped
    policy: {all_upstreams: true, default: allow}
    limits: {max_in_flight: 2}
api_keys:
  - {tenant: free, principal: f, key_file: %[2]s/free.key}
  - {tenant: rated, principal: r, key_file: %[2]s/rated.key}
  - {tenant: capped, principal: c, key_file: %[2]s/capped.key}
`, fxURL, dir), 2)
	client := func(edge int, key string) *keyClient {
		return &keyClient{url: d.edges[edge] + "/mcp", auth: "Bearer " + keys[key]}
	}
	nc, err := nats.Connect(d.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Both edges are members of the fleet, and serve the catalog.
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		kv, err := js.KeyValue("switchyard_edges")
		if err != nil {
			return err
		}
		ids, err := kv.Keys()
		if err != nil {
			return err
		}
		if slices.Sort(ids); !slices.Equal(ids, []string{"edge-1", "edge-2"}) {
			return fmt.Errorf("fleet %v", ids)
		}
		for e := range d.edges {
			if a := callEcho(t, client(e, "free")); len(a.result) == 0 {
				return fmt.Errorf("edge %d: HTTP %d %s", e+1, a.status, a.body)
			}
		}
		return nil
	})

	t.Run("burst shared", func(t *testing.T) {
		// A burst of 4 on two edges is 2 on each: 4 admitted in all.
		for e := range d.edges {
			c := client(e, "rated")
			for i := range 2 {
				if a := callEcho(t, c); len(a.result) == 0 {
					t.Fatalf("edge %d, call %d of its share of 2: HTTP %d %s", e+1, i+1, a.status, a.body)
				}
			}
			a := callEcho(t, c)
			if ld, ok := refusal(a.rpcErr(t)); !ok || ld.Limit != "tenant_rate" {
				t.Fatalf("edge %d beyond its share: HTTP %d %s, want -32069 tenant_rate", e+1, a.status, a.body)
			}
		}
	})

	t.Run("in flight shared", func(t *testing.T) {
		// max_in_flight 2 on two edges is 1 on each.
		reached := make(chan string, 16)
		sub, err := nc.Subscribe(proto.Prefix+"worker.*."+proto.OpToolsCall, func(m *nats.Msg) {
			var req proto.Request
			if proto.Unmarshal(m.Data, &req) == nil && req.Tenant == "capped" && req.Name == "slow" {
				reached <- req.Edge
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 2)
		for e := range d.edges {
			cs := connectKey(t, d.edges[e]+"/mcp", v2025, keys["capped"], nil)
			// The session's upstream session is opened by a first call, so
			// that the cancellations below do not land in its handshake (a
			// call cancelled there keeps the worker busy for many seconds:
			// reported to the upstream-worker's owner).
			if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "warm"}}); err != nil {
				t.Fatal(err)
			}
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fixture__slow", Arguments: map[string]any{"ms": 60_000}})
				done <- err
			}()
			select {
			case edge := <-reached:
				t.Logf("a slow call is in flight on %s", edge)
			case err := <-done:
				t.Fatalf("the slow call on edge %d ended: %v", e+1, err)
			case <-time.After(20 * time.Second):
				t.Fatalf("the slow call on edge %d did not reach a worker in 20 s", e+1)
			}
			// This edge's share is taken; the other edge still admits
			// until its own is.
			a := callEcho(t, client(e, "capped"))
			if ld, ok := refusal(a.rpcErr(t)); !ok || ld.Limit != "in_flight" {
				t.Fatalf("edge %d with its share in flight: HTTP %d %.300s, want -32069 in_flight", e+1, a.status, a.body)
			}
			if e == 0 {
				if a := callEcho(t, client(1, "capped")); len(a.result) == 0 {
					t.Fatalf("edge 2 while edge 1's share is in flight: HTTP %d %.300s", a.status, a.body)
				}
			}
		}
		select {
		case err := <-done:
			t.Fatalf("a slow call ended before the refusals: %v", err)
		default:
		}
		cancel()
		for range 2 {
			<-done
		}
	})
}
