package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
)

// hintServer is a go-sdk upstream (streamable HTTP) with tools t0..t2 and
// prompts p0..p1, listed one per page, whose list results carry the
// SEP-2549 hints its hint function sets through ServerOptions.SetCacheable;
// it counts the list requests it answers.
type hintServer struct {
	url string

	mu    sync.Mutex
	lists map[string]int            // guarded by mu: list requests by method
	pages map[string]map[string]int // guarded by mu: page number by method and cursor, in first-seen order
}

// newHintServer starts a hintServer: stateless serves 2026-07-28, else
// 2025-11-25 sessions. hint gets the method and the page number (0: the
// first page) of every list result.
func newHintServer(t *testing.T, stateless bool, hint func(method string, page int, c *mcp.Cacheable)) *hintServer {
	t.Helper()
	hs := &hintServer{lists: map[string]int{}, pages: map[string]map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "hint-upstream", Version: "1"}, &mcp.ServerOptions{
		PageSize: 1,
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			var method, cursor string
			switch p := req.GetParams().(type) {
			case *mcp.ListToolsParams:
				method, cursor = "tools/list", p.Cursor
			case *mcp.ListPromptsParams:
				method, cursor = "prompts/list", p.Cursor
			default:
				return
			}
			hint(method, hs.page(method, cursor), c)
		},
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasSuffix(method, "/list") {
				hs.mu.Lock()
				hs.lists[method]++
				hs.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	obj := json.RawMessage(`{"type":"object"}`)
	for i := range 3 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	for i := range 2 {
		srv.AddPrompt(&mcp.Prompt{Name: fmt.Sprintf("p%d", i)}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	hs.url = ts.URL
	return hs
}

func (hs *hintServer) page(method, cursor string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if cursor == "" {
		return 0
	}
	m := hs.pages[method]
	if m == nil {
		m = map[string]int{}
		hs.pages[method] = m
	}
	if _, ok := m[cursor]; !ok {
		m[cursor] = len(m) + 1
	}
	return m[cursor]
}

// listed is the number of method requests the server answered.
func (hs *hintServer) listed(method string) int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.lists[method]
}

func ttlOf(set *proto.ListSet) string {
	if set == nil {
		return "no set"
	}
	ttl := "nil"
	if set.TTLMs != nil {
		ttl = fmt.Sprint(*set.TTLMs)
	}
	return fmt.Sprintf("ttlMs=%s cacheScope=%q", ttl, set.CacheScope)
}

// TestUpstreamCatalogHints: the stored list sets carry the upstream's
// ttlMs and cacheScope, merged over the pages: the smallest ttlMs, public
// only if every page said so; a list without hints has none.
func TestUpstreamCatalogHints(t *testing.T) {
	hint := func(method string, page int, c *mcp.Cacheable) {
		if method == "prompts/list" {
			c.TTLMs, c.CacheScope = 20000, "public"
			return
		}
		c.TTLMs, c.CacheScope = []int{60000, 30000, 45000}[page], []string{"public", "private", "public"}[page]
	}
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			hs := newHintServer(t, stateless, hint)
			u := startUpstream(t, hs.url, false, nil)
			store := u.opts.Tools.(*memTools)
			for _, c := range []struct{ kind, want string }{
				{proto.KindTools, `ttlMs=30000 cacheScope="private"`},
				{proto.KindPrompts, `ttlMs=20000 cacheScope="public"`},
				{proto.KindResources, `ttlMs=nil cacheScope=""`}, // not advertised
			} {
				if got := ttlOf(store.get(c.kind)); got != c.want {
					t.Errorf("%s set: %s, want %s", c.kind, got, c.want)
				}
			}
			if n := len(store.get(proto.KindTools).Items); n != 3 {
				t.Errorf("%d tools stored, want 3", n)
			}
		})
	}
}

// TestUpstreamCatalogHintsRaw: hints read off the wire: a page without
// ttlMs or cacheScope, next to one with them, counts as ttlMs 0 and
// private; a list whose pages have none has none.
func TestUpstreamCatalogHintsRaw(t *testing.T) {
	s := newTestServer(t, "sse", func(w http.ResponseWriter, r *http.Request, p *posted) bool {
		var result string
		switch p.msg.Method {
		case "tools/list":
			result = `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"c2","ttlMs":5000,"cacheScope":"public"}`
			if strings.Contains(string(p.msg.Params), `"c2"`) {
				result = `{"tools":[{"name":"b","inputSchema":{"type":"object"}}]}`
			}
		case "prompts/list":
			result = `{"prompts":[]}`
		default:
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, p.msg.ID, result)
		return true
	})
	u := startUpstream(t, s.url(), false, nil)
	store := u.opts.Tools.(*memTools)
	if got := ttlOf(store.get(proto.KindTools)); got != `ttlMs=0 cacheScope="private"` {
		t.Errorf("tools set: %s", got)
	}
	if got := ttlOf(store.get(proto.KindPrompts)); got != `ttlMs=nil cacheScope=""` {
		t.Errorf("prompts set: %s", got)
	}
}

// TestUpstreamCatalogHintsEverything: the go-sdk conformance server sends
// ttlMs 0 and cacheScope "public" even at 2025-11-25; ttlMs 0 schedules no
// refresh.
func TestUpstreamCatalogHintsEverything(t *testing.T) {
	u := startUpstream(t, startEverything(t, false), false, nil)
	if v := poolVersion(t, u); v != legacyProtocol {
		t.Fatalf("negotiated %s", v)
	}
	if got := ttlOf(u.opts.Tools.(*memTools).get(proto.KindTools)); got != `ttlMs=0 cacheScope="public"` {
		t.Errorf("tools set: %s", got)
	}
	u.ttlMu.Lock()
	defer u.ttlMu.Unlock()
	if u.ttls != [len(listKinds)]time.Duration{} {
		t.Errorf("ttlMs refreshes scheduled: %v", u.ttls)
	}
}

// TestUpstreamCatalogTTLRefresh: a list whose ttlMs is 1500 is listed
// again every 1.5 s without any list_changed, and the sets so stored are
// not stamped Notified; with ttlMs 0 it is listed once; a 1 ms ttlMs is
// held to one listing a second.
func TestUpstreamCatalogTTLRefresh(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			ttl := func(ms int) func(string, int, *mcp.Cacheable) {
				return func(_ string, _ int, c *mcp.Cacheable) { c.TTLMs = ms }
			}
			// Pages of one list: listing the tools is 3 tools/list requests.
			const pages = 3
			short, zero, tiny := newHintServer(t, stateless, ttl(1500)), newHintServer(t, stateless, ttl(0)), newHintServer(t, stateless, ttl(1))
			start := time.Now()
			us := startUpstream(t, short.url, false, nil)
			startUpstream(t, zero.url, false, nil)
			startUpstream(t, tiny.url, false, nil)
			eventually(t, 30*time.Second, "two ttlMs refreshes of the tools", func() bool {
				n, _ := us.opts.Tools.(*memTools).count(proto.KindTools)
				return short.listed("tools/list") >= 3*pages && n >= 3
			})
			elapsed := time.Since(start)
			if n, notified := us.opts.Tools.(*memTools).count(proto.KindTools); notified != 0 {
				t.Errorf("%d of %d tools sets stamped Notified", notified, n)
			}
			if n := short.listed("prompts/list"); n < 2*2 {
				t.Errorf("prompts listed %d times in %v, want ttlMs refreshes too", n/2, elapsed)
			}
			if n := zero.listed("tools/list"); n != pages {
				t.Errorf("ttlMs 0: tools listed %d times in %v, want once", n/pages, elapsed)
			}
			// At most one listing a second (plus the first, plus one
			// in flight).
			if n, most := tiny.listed("tools/list")/pages, int(time.Since(start)/time.Second)+2; n > most {
				t.Errorf("ttlMs 1: tools listed %d times in %v, want at most %d", n, time.Since(start), most)
			}
		})
	}
}

// TestUpstreamCatalogFoldHints checks the merging of the pages' hints and
// their reading off the wire.
func TestUpstreamCatalogFoldHints(t *testing.T) {
	i := func(n int64) *int64 { return &n }
	show := func(h cacheHints) string {
		return ttlOf(&proto.ListSet{TTLMs: h.ttlMs, CacheScope: h.scope})
	}
	for _, c := range []struct {
		name  string
		pages []cacheHints
		want  string
	}{
		{"no pages", nil, `ttlMs=nil cacheScope=""`},
		{"none", []cacheHints{{}, {}}, `ttlMs=nil cacheScope=""`},
		{"one", []cacheHints{{i(500), "public"}}, `ttlMs=500 cacheScope="public"`},
		{"smallest, all public", []cacheHints{{i(500), "public"}, {i(200), "public"}, {i(900), "public"}}, `ttlMs=200 cacheScope="public"`},
		{"one private", []cacheHints{{i(500), "public"}, {i(600), "private"}}, `ttlMs=500 cacheScope="private"`},
		{"unknown scope", []cacheHints{{i(500), "shared"}}, `ttlMs=500 cacheScope="private"`},
		{"a page without", []cacheHints{{i(500), "public"}, {}}, `ttlMs=0 cacheScope="private"`},
		{"ttl only", []cacheHints{{i(500), ""}, {i(700), ""}}, `ttlMs=500 cacheScope=""`},
		{"scope only", []cacheHints{{nil, "public"}}, `ttlMs=nil cacheScope="public"`},
		{"negative", []cacheHints{{i(-5), "public"}}, `ttlMs=0 cacheScope="public"`},
	} {
		if got := show(foldHints(c.pages)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	for _, c := range []struct{ result, want string }{
		{`{}`, `ttlMs=nil cacheScope=""`},
		{`{"ttlMs":1500,"cacheScope":"public"}`, `ttlMs=1500 cacheScope="public"`},
		{`{"ttlMs":0,"cacheScope":"private"}`, `ttlMs=0 cacheScope="private"`},
		{`{"ttlMs":1500.9}`, `ttlMs=1500 cacheScope=""`},
		{`{"ttlMs":-3}`, `ttlMs=0 cacheScope=""`},
		{`{"ttlMs":1e300}`, `ttlMs=4611686018427387904 cacheScope=""`},
		{`{"ttlMs":null,"cacheScope":null}`, `ttlMs=nil cacheScope=""`},
		{`{"ttlMs":"soon","cacheScope":7}`, `ttlMs=nil cacheScope=""`},
	} {
		var res map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.result), &res); err != nil {
			t.Fatal(err)
		}
		if got := show(rawHints(res)); got != c.want {
			t.Errorf("%s: %s, want %s", c.result, got, c.want)
		}
	}
}

// TestUpstreamCatalogTTLDelay: the delay of a ttlMs refresh, floored at
// one second.
func TestUpstreamCatalogTTLDelay(t *testing.T) {
	u := New(Options{Spec: proto.UpstreamSpec{Name: "up", Transport: proto.TransportStreamable}, Tools: &memTools{}, Closer: NewCloser()})
	i := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		ttlMs *int64
		want  time.Duration
	}{{nil, 0}, {i(0), 0}, {i(-1), 0}, {i(1), time.Second}, {i(1500), 1500 * time.Millisecond}, {i(1 << 62), time.Duration(1<<63 - 1)}} {
		u.setTTL(0, c.ttlMs)
		if got := u.ttls[0]; got/time.Millisecond != c.want/time.Millisecond {
			t.Errorf("ttlMs %v: delay %v, want %v", c.ttlMs, got, c.want)
		}
	}
}
