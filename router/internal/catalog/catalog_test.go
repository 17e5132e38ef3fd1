package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/policy"
)

func toolJSON(name string) []byte {
	return []byte(fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`, name))
}

func state(t *testing.T) *State {
	t.Helper()
	s := NewState("__")
	for _, u := range []string{"a", "b"} {
		s.SetUpstream(u, true)
		if err := s.SetTools(u, [][]byte{toolJSON("x"), toolJSON("y.z")}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// allowAll is the default tenant's policy: every upstream, default allow.
func allowAll(t testing.TB) *policy.Policy {
	t.Helper()
	p, err := policy.Compile(policy.Spec{AllUpstreams: true, Default: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type page struct {
	Tools      []map[string]json.RawMessage `json:"tools"`
	NextCursor string                       `json:"nextCursor"`
}

func listAll(t *testing.T, v *View, size int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for i := 0; ; i++ {
		b, err := v.Page(cursor, size)
		if err != nil {
			t.Fatal(err)
		}
		var p page
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("page %d: %v: %s", i, err, b)
		}
		for _, tl := range p.Tools {
			var n string
			_ = json.Unmarshal(tl["name"], &n)
			if _, ok := tl["execution"]; !ok {
				t.Fatalf("unknown field dropped: %s", b)
			}
			got = append(got, n)
		}
		if p.NextCursor == "" {
			return got
		}
		cursor = p.NextCursor
	}
}

func TestCatalogPaging(t *testing.T) {
	snap := state(t).Build(func(string) bool { return true })
	for _, size := range []int{1, 2, 3, 100} {
		got := listAll(t, snap.Federated, size)
		if len(got) != 4 || !slices.IsSorted(got) {
			t.Fatalf("size %d: %v", size, got)
		}
	}
	if got := listAll(t, snap.Pass["a"], 1); !slices.Equal(got, []string{"x", "y.z"}) {
		t.Fatalf("passthrough: %v", got)
	}
	for _, bad := range []string{"!!", "Z2FyYmFnZQ"} { // not base64; base64 of "garbage"
		if _, err := snap.Federated.Page(bad, 1); err != ErrBadCursor {
			t.Fatalf("cursor %q: %v", bad, err)
		}
	}
}

func TestCatalogDownUpstream(t *testing.T) {
	s := state(t)
	all := s.Build(func(string) bool { return true })
	snap := s.Build(func(u string) bool { return u != "b" })
	if got := listAll(t, snap.Federated, 10); len(got) != 2 {
		t.Fatalf("down upstream listed: %v", got)
	}
	if e, ok := snap.Federated.Lookup("b__x"); !ok || e.Upstream != "b" || e.Orig != "x" {
		t.Fatalf("lookup of a down upstream's tool: %v %v", e, ok)
	}
	if ch := Changed(all, snap); !slices.Equal(ch, []string{"b"}) {
		t.Fatalf("changed: %v", ch)
	}
	if ch := Changed(snap, snap); len(ch) != 0 {
		t.Fatalf("no change reported as %v", ch)
	}
}

func TestCatalogBadTools(t *testing.T) {
	s := NewState("__")
	s.SetUpstream("a", true)
	err := s.SetTools("a", [][]byte{[]byte(`{"name":1}`), []byte(`nope`), toolJSON("ok")})
	if err == nil {
		t.Fatal("bad tools not reported")
	}
	if got := listAll(t, s.Build(func(string) bool { return true }).Federated, 10); !slices.Equal(got, []string{"a__ok"}) {
		t.Fatalf("got %v", got)
	}
}

// BenchmarkCatalog measures the list merge: building the federated and
// passthrough views of U upstreams × T tools, what the router does on
// every catalog or tool-set change. A tools/list page is served per call
// from the router's per-tenant view cache: BenchmarkFederatedListTools
// (router package) measures that.
func BenchmarkCatalog(b *testing.B) {
	for _, shape := range []struct{ u, t int }{{1, 1}, {5, 20}, {20, 50}} {
		s := NewState("__")
		for u := range shape.u {
			name := fmt.Sprintf("up%02d", u)
			s.SetUpstream(name, true)
			raw := make([][]byte, shape.t)
			for t := range raw {
				raw[t] = toolJSON(fmt.Sprintf("tool-%04d", t))
			}
			if err := s.SetTools(name, raw); err != nil {
				b.Fatal(err)
			}
		}
		up := func(string) bool { return true }
		b.Run(fmt.Sprintf("shape=%dx%d/op=merge", shape.u, shape.t), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Build(up)
			}
		})
	}
}
