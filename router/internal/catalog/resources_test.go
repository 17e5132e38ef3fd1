package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestCatalogTemplateRegexp(t *testing.T) {
	for _, c := range []struct {
		tmpl, uri string
		match     bool
	}{
		{"test://template/{id}/data", "test://template/42/data", true},
		{"test://template/{id}/data", "test://template/4/2/data", false},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"search://q{?query,limit}", "search://q?query=x&limit=2", true},
		{"search://q{?query,limit}", "search://q", true},
		{"db://{table}{/id}", "db://users/7", true},
		{"a.b://x", "aXb://x", false}, // literals are quoted
	} {
		re, err := templateRegexp(c.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", c.tmpl, err)
		}
		if got := re.MatchString(c.uri); got != c.match {
			t.Errorf("%s ~ %s = %v, want %v", c.tmpl, c.uri, got, c.match)
		}
	}
	for _, bad := range []string{"x://{id", "x://{}"} {
		if _, err := templateRegexp(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

func itemsJSON(key string, vals ...string) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(fmt.Sprintf(`{%q:%q,"x-extra":1}`, key, v))
	}
	return out
}

// kindsState has upstreams a and b with prompts, resources and templates;
// both list "shared://r".
func kindsState(t *testing.T) *State {
	t.Helper()
	s := NewState("__")
	for _, u := range []string{"a", "b"} {
		s.SetUpstream(u, true)
		for _, set := range []struct {
			kind string
			raw  [][]byte
		}{
			{proto.KindPrompts, itemsJSON("name", "greet")},
			{proto.KindResources, itemsJSON("uri", u+"://doc", "shared://r")},
			{proto.KindResourceTemplates, itemsJSON("uriTemplate", u+"://item/{id}")},
		} {
			if err := s.SetList(set.kind, u, set.raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

func pageItems(t *testing.T, v *View, key, resultKey string) []string {
	t.Helper()
	b, err := v.Page("", 100)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string][]map[string]json.RawMessage
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	var out []string
	for _, it := range res[resultKey] {
		var s string
		_ = json.Unmarshal(it[key], &s)
		if _, ok := it["x-extra"]; !ok {
			t.Fatalf("unknown member dropped: %s", b)
		}
		out = append(out, s)
	}
	return out
}

func TestCatalogKinds(t *testing.T) {
	snap := kindsState(t).Build(func(string) bool { return true })
	for _, c := range []struct {
		kind, view, key, resultKey string
		want                       []string
	}{
		{proto.KindPrompts, "", "name", "prompts", []string{"a__greet", "b__greet"}},
		{proto.KindPrompts, "b", "name", "prompts", []string{"greet"}},
		{proto.KindResources, "", "uri", "resources", []string{"a://doc", "b://doc", "shared://r"}},
		{proto.KindResources, "b", "uri", "resources", []string{"b://doc", "shared://r"}},
		{proto.KindResourceTemplates, "", "uriTemplate", "resourceTemplates", []string{"a://item/{id}", "b://item/{id}"}},
		{proto.KindTools, "", "name", "tools", nil},
	} {
		v := snap.List(c.kind, c.view)
		if v == nil {
			t.Fatalf("no view %s/%q", c.kind, c.view)
		}
		if got := pageItems(t, v, c.key, c.resultKey); !slices.Equal(got, c.want) {
			t.Errorf("%s/%q = %v, want %v", c.kind, c.view, got, c.want)
		}
	}
	if e, ok := snap.List(proto.KindPrompts, "").Lookup("b__greet"); !ok || e.Upstream != "b" || e.Orig != "greet" {
		t.Errorf("prompt lookup: %+v %v", e, ok)
	}
	if snap.List(proto.KindPrompts, "zz") != nil || snap.List("nope", "") != nil {
		t.Error("unknown upstream or kind has a view")
	}
	if err := kindsState(t).SetList("nope", "a", nil); err != ErrUnknownKind {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestCatalogResourceUpstream(t *testing.T) {
	snap := kindsState(t).Build(func(string) bool { return true })
	for _, c := range []struct {
		uri, want string
		ok        bool
	}{
		{"b://doc", "b", true},
		{"shared://r", "a", true}, // the first upstream keeps a shared URI
		{"b://item/9", "b", true},
		{"a://item/{id}", "a", true}, // the template itself, decided as one
		{"c://nothing", "", false},
	} {
		if got, ok := snap.ResourceUpstream(c.uri, allowAll(t)); got != c.want || ok != c.ok {
			t.Errorf("ResourceUpstream(%q) = %q, %v; want %q, %v", c.uri, got, ok, c.want, c.ok)
		}
	}
	one := NewState("__")
	one.SetUpstream("only", true)
	one.SetUpstream("tools-only", true)
	if err := one.SetList(proto.KindResources, "only", itemsJSON("uri", "x://1")); err != nil {
		t.Fatal(err)
	}
	if got, ok := one.Build(func(string) bool { return true }).ResourceUpstream("y://unlisted", allowAll(t)); got != "only" || !ok {
		t.Errorf("single resource upstream: %q %v", got, ok)
	}
}

func TestCatalogChangedKind(t *testing.T) {
	s := kindsState(t)
	a := s.Build(func(string) bool { return true })
	if err := s.SetList(proto.KindPrompts, "b", itemsJSON("name", "greet", "bye")); err != nil {
		t.Fatal(err)
	}
	b := s.Build(func(string) bool { return true })
	if got := ChangedKind(proto.KindPrompts, a, b); !slices.Equal(got, []string{"b"}) {
		t.Errorf("prompts changed: %v", got)
	}
	if got := ChangedKind(proto.KindResources, a, b); len(got) != 0 {
		t.Errorf("resources changed: %v", got)
	}
}

// TestCatalogHints: a view's pages carry the caching hints of what it
// merged: the smallest ttlMs (an upstream without one counts as 0) and
// "public" only when every upstream said so; none when nobody gave hints.
func TestCatalogHints(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	s := kindsState(t)
	page := func(view string) string {
		b, err := s.Build(func(string) bool { return true }).List(proto.KindPrompts, view).Page("", 10)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if p := page(""); strings.Contains(p, "ttlMs") {
		t.Fatalf("hints without any upstream giving them: %s", p)
	}
	s.SetHints(proto.KindPrompts, "a", Hints{TTLMs: i(60000), Scope: "public"})
	if p := page("a"); !strings.HasSuffix(p, `],"ttlMs":60000,"cacheScope":"public"}`) {
		t.Fatalf("passthrough a: %s", p)
	}
	if p := page(""); !strings.HasSuffix(p, `],"ttlMs":0,"cacheScope":"private"}`) {
		t.Fatalf("federated, b without hints: %s", p)
	}
	s.SetHints(proto.KindPrompts, "b", Hints{TTLMs: i(5000), Scope: "public"})
	if p := page(""); !strings.HasSuffix(p, `],"ttlMs":5000,"cacheScope":"public"}`) {
		t.Fatalf("federated: %s", p)
	}
	s.SetHints(proto.KindPrompts, "b", Hints{TTLMs: i(90000), Scope: "private"})
	if p := page(""); !strings.HasSuffix(p, `],"ttlMs":60000,"cacheScope":"private"}`) {
		t.Fatalf("federated, one private: %s", p)
	}
}

// TestCatalogNotifiedIsAChange: an upstream's list_changed that left its
// items as they were still changes the view (the upstream said so).
func TestCatalogNotifiedIsAChange(t *testing.T) {
	s := kindsState(t)
	up := func(string) bool { return true }
	a := s.Build(up)
	s.SetHints(proto.KindPrompts, "a", Hints{Notified: 42})
	b := s.Build(up)
	if got := ChangedKind(proto.KindPrompts, a, b); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("changed %v, want [a]", got)
	}
	if got := ChangedKind(proto.KindPrompts, b, s.Build(up)); len(got) != 0 {
		t.Fatalf("changed %v without a new notification", got)
	}
	if p, _ := b.List(proto.KindPrompts, "a").Page("", 10); strings.Contains(string(p), "ttlMs") {
		t.Fatalf("a notification alone gave caching hints: %s", p)
	}
}
