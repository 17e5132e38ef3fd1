package router

import (
	"fmt"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// TestRouterViewCache: the cache keeps at most its byte budget, least
// recently used out first; a newer catalog snapshot empties it; a list
// built from an older snapshot than the cache's is served but not kept;
// purge drops what it is told to.
func TestRouterViewCache(t *testing.T) {
	st := catalog.NewState("__")
	st.SetUpstream("a", true)
	var raw [][]byte
	for i := range 10 {
		raw = append(raw, fmt.Appendf(nil, `{"name":"t%02d"}`, i))
	}
	if err := st.SetTools("a", raw); err != nil {
		t.Fatal(err)
	}
	up := func(string) bool { return true }
	old, cur := st.Build(up), st.Build(up)
	var tenants []tenancy.Tenant
	for i := range 8 {
		tn := config.DefaultTenants()[0]
		tn.Name, tn.Anonymous = fmt.Sprintf("t%d", i), false
		tenants = append(tenants, tn)
	}
	ten := tenancy.NewSnapshot(tenants, nil)
	scopeOf := func(i int, cat *catalog.Snapshot) *scope {
		name := fmt.Sprintf("t%d", i)
		_, pol, ok := ten.Tenant(name)
		if !ok {
			t.Fatalf("no tenant %s", name)
		}
		return &scope{tenant: name, pol: pol, cat: cat}
	}
	one := build(scopeOf(0, cur), cur.Federated, viewKey{tenant: "t0", pol: scopeOf(0, cur).pol, kind: proto.KindTools}, 4)
	c := newViewCache(4, 3*one.bytes) // room for three lists
	for i := range 4 {
		if _, perr := c.page(scopeOf(i, cur), proto.KindTools, "", nil); perr != nil {
			t.Fatal(perr)
		}
	}
	if n, b := c.len(); n != 3 || b > 3*one.bytes {
		t.Fatalf("%d lists, %d bytes; want 3 within %d", n, b, 3*one.bytes)
	}
	c.mu.Lock()
	_, has0 := c.m[viewKey{tenant: "t0", pol: scopeOf(0, cur).pol, kind: proto.KindTools}]
	_, has3 := c.m[viewKey{tenant: "t3", pol: scopeOf(3, cur).pol, kind: proto.KindTools}]
	c.mu.Unlock()
	if has0 || !has3 {
		t.Fatalf("t0 kept %v (want evicted first), t3 kept %v", has0, has3)
	}
	if _, perr := c.page(scopeOf(5, old), proto.KindTools, "", nil); perr != nil {
		t.Fatal(perr)
	}
	if n, _ := c.len(); n != 3 {
		t.Fatalf("an older snapshot's list was kept: %d lists", n)
	}
	c.purge(func(k viewKey) bool { return k.tenant == "t3" })
	if n, _ := c.len(); n != 2 {
		t.Fatalf("after purge: %d lists, want 2", n)
	}
	newer := st.Build(up)
	if _, perr := c.page(scopeOf(6, newer), proto.KindTools, "", nil); perr != nil {
		t.Fatal(perr)
	}
	if n, _ := c.len(); n != 1 {
		t.Fatalf("after a newer snapshot: %d lists, want 1", n)
	}
}

// TestRouterListCursorParams: the cursor is read from list params as
// encoding/json would, and params it could not decode are refused.
func TestRouterListCursorParams(t *testing.T) {
	for _, c := range []struct {
		params, want string
		bad          bool
	}{
		{"", "", false},
		{"null", "", false},
		{"{}", "", false},
		{`{"cursor":null}`, "", false},
		{`{"cursor":"abc"}`, "abc", false},
		{`{"_meta":{"x":1}, "cursor" : "a\u0062c"}`, "abc", false},
		{`{"cursor":1}`, "", true},
		{`[1]`, "", true},
		{`{"cursor":`, "", true},
	} {
		got, perr := listCursor([]byte(c.params))
		if string(got) != c.want || (perr != nil) != c.bad {
			t.Errorf("listCursor(%s) = %q, %v; want %q, bad %v", c.params, got, perr, c.want, c.bad)
		}
	}
}
