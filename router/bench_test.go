package router

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

// benchShape is a federated catalog of ups upstreams with tools tools
// each, listed by tenant.
type benchShape struct {
	name        string
	ups, tools  int
	tenant      string
	wantVisible int
}

var benchShapes = []benchShape{
	{"1x10", 1, 10, DefaultTenant, 10},
	{"5x20", 5, 20, DefaultTenant, 100},
	{"20x50", 20, 50, DefaultTenant, 1000},
	{"20x50-deny-default-globs", 20, 50, "globs", 0},
}

// globsTenant sees 15 of the 20 upstreams and, by globs over the
// federated names with deny by default, every get and list tool, all of
// u0?'s but deletes, and nothing with "secret" in it (internal/policy's
// benchmark policy).
func globsTenant() tenancy.Tenant {
	var ups []string
	for u := range 15 {
		ups = append(ups, fmt.Sprintf("u%02d", u))
	}
	return tenancy.Tenant{Name: "globs", Policy: policy.Spec{Upstreams: ups, Default: policy.Deny, Rules: []policy.Rule{
		{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "*__delete_*"},
		{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "u0?__*"},
		{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "*__get_*"},
		{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "*__list_*"},
		{Effect: policy.Deny, Pattern: "*secret*"},
	}}}
}

// benchRouter returns a router (never run) whose catalog snapshot holds
// the shape's tools, all up, and whose tenancy holds the default tenant
// and globsTenant.
func benchRouter(b *testing.B, sh benchShape) *Service { return benchRouterT(b, sh) }

func benchRouterT(b testing.TB, sh benchShape) *Service {
	b.Helper()
	srv := provisiontest.Start(b)
	src := &swapSource{}
	src.set(b, append(config.DefaultTenants(), globsTenant())...)
	s, err := New(Config{Tenancy: src}, natstest.Connect(b, srv), nil)
	if err != nil {
		b.Fatal(err)
	}
	verbs := []string{"get", "list", "create", "update", "delete"}
	st := catalog.NewState("__")
	for u := range sh.ups {
		up := fmt.Sprintf("u%02d", u)
		st.SetUpstream(up, true)
		var raw [][]byte
		for i := range sh.tools {
			raw = append(raw, fmt.Appendf(nil, `{"name":"%s_thing%02d","description":"Does %s on thing %d of %s.",`+
				`"inputSchema":{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"}},"required":["id"]}}`,
				verbs[i%len(verbs)], i, verbs[i%len(verbs)], i, up))
		}
		if err := st.SetTools(up, raw); err != nil {
			b.Fatal(err)
		}
	}
	s.snap.Store(st.Build(func(string) bool { return true }))
	return s
}

// listTools is the router's handling of a tools/list route message after
// its envelope is decoded, up to the reply bytes it publishes: the tenant
// and catalog snapshots read once, the cursor read from params, the
// tenant's view found (or built) and its page taken.
func listTools(s *Service, tenant string, req *proto.Request) ([]byte, *proto.Error) {
	_, pol, ok := s.tenancy.Current().Tenant(tenant)
	if !ok {
		return nil, errUnknownTenant
	}
	sc := scope{tenant: tenant, pol: pol, cat: s.snap.Load()}
	return s.listReply(&sc, req, proto.KindTools)
}

// BenchmarkFederatedListTools measures one tools/list of the federated
// view for a tenant, gateway side (no NATS I/O): first page, default page
// size (100), from a warm view cache. shape=UxT is U upstreams of T
// tools; -deny-default-globs lists for a tenant whose policy denies by
// default with a few allow and deny globs (500 of the 1,000 tools visible).
func BenchmarkFederatedListTools(b *testing.B) {
	for _, sh := range benchShapes {
		b.Run("shape="+sh.name, func(b *testing.B) {
			s := benchRouter(b, sh)
			req := &proto.Request{Method: "tools/list", Params: []byte(`{}`)}
			checkBenchList(b, s, sh, req)
			b.ReportAllocs()
			for b.Loop() {
				if _, perr := listTools(s, sh.tenant, req); perr != nil {
					b.Fatal(perr)
				}
			}
		})
	}
}

// BenchmarkFederatedListToolsCold is BenchmarkFederatedListTools on a
// cold view cache: each request filters the catalog by the tenant's
// policy and renders every page (what the first list after a catalog or
// policy change costs a tenant).
func BenchmarkFederatedListToolsCold(b *testing.B) {
	for _, sh := range benchShapes {
		b.Run("shape="+sh.name, func(b *testing.B) {
			s := benchRouter(b, sh)
			req := &proto.Request{Method: "tools/list", Params: []byte(`{}`)}
			checkBenchList(b, s, sh, req)
			b.ReportAllocs()
			for b.Loop() {
				s.views.purge(func(viewKey) bool { return true })
				if _, perr := listTools(s, sh.tenant, req); perr != nil {
					b.Fatal(perr)
				}
			}
		})
	}
}

// nextCursor returns the nextCursor of a list result.
func nextCursor(t testing.TB, result []byte) string {
	t.Helper()
	var page struct {
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(result, &page); err != nil || page.NextCursor == "" {
		t.Fatalf("no nextCursor in %s (%v)", result, err)
	}
	return page.NextCursor
}

// checkBenchList checks that the shape's tenant sees what it should.
func checkBenchList(b *testing.B, s *Service, sh benchShape, req *proto.Request) {
	b.Helper()
	if _, perr := listTools(s, sh.tenant, req); perr != nil {
		b.Fatal(perr)
	}
	_, pol, _ := s.tenancy.Current().Tenant(sh.tenant)
	cat := s.snap.Load()
	l := s.views.get(&scope{tenant: sh.tenant, pol: pol, cat: cat}, cat.Federated, viewKey{tenant: sh.tenant, pol: pol, kind: proto.KindTools})
	want := sh.wantVisible
	if want == 0 {
		want = 500
	}
	if len(l.entries) != want {
		b.Fatalf("%s sees %d tools, want %d", sh.tenant, len(l.entries), want)
	}
}

// BenchmarkRouterToolDecision measures the policy part of tools/call's
// hot path: the tool's lookup in the view and the tenant's decision on it
// (the deny-by-default globs tenant, 20x50 catalog).
func BenchmarkRouterToolDecision(b *testing.B) {
	s := benchRouter(b, benchShapes[3])
	_, pol, _ := s.tenancy.Current().Tenant("globs")
	sc := scope{tenant: "globs", pol: pol, cat: s.snap.Load()}
	req := &proto.Request{Method: "tools/call", Name: "u12__get_thing10"}
	if sc.tool(req) == nil {
		b.Fatal("fixture tool denied")
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = sc.tool(req)
	}
}
