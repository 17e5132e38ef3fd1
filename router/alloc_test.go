//go:build !race

package router

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestRouterHotPathAllocs pins the allocations of the policy's share of
// the hot paths (the race detector's instrumentation may allocate, hence
// the build tag): a tools/call decision, and a warm tools/list of the
// first page and of a later one, for the deny-by-default globs tenant.
func TestRouterHotPathAllocs(t *testing.T) {
	s := benchRouterT(t, benchShapes[3])
	_, pol, _ := s.tenancy.Current().Tenant("globs")
	sc := scope{tenant: "globs", pol: pol, cat: s.snap.Load()}
	call := &proto.Request{Method: "tools/call", Name: "u12__get_thing10"}
	denied := &proto.Request{Method: "tools/call", Name: "u12__delete_thing04"}
	if sc.tool(call) == nil || sc.tool(denied) != nil {
		t.Fatal("fixture decisions changed")
	}
	first := &proto.Request{Method: "tools/list", Params: []byte(`{}`)}
	page, perr := listTools(s, "globs", first)
	if perr != nil {
		t.Fatal(perr)
	}
	var rep proto.Reply
	if err := proto.Unmarshal(page, &rep); err != nil {
		t.Fatal(err)
	}
	cursor := nextCursor(t, rep.Result)
	second := &proto.Request{Method: "tools/list", Params: []byte(`{"cursor":"` + cursor + `"}`)}
	if _, perr := listTools(s, "globs", second); perr != nil {
		t.Fatal(perr)
	}
	for name, fn := range map[string]func(){
		"call allowed": func() { sc.tool(call) },
		"call denied":  func() { sc.tool(denied) },
		"list first":   func() { _, _ = listTools(s, "globs", first) },
		"list cursor":  func() { _, _ = listTools(s, "globs", second) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
