package policy

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-mcp/switchyard/proto"
)

func mustCompile(t testing.TB, spec Spec) *Policy {
	t.Helper()
	p, err := Compile(spec)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

type decision struct {
	kind              Kind
	upstream, subject string
	want              bool
}

func TestPolicyDecisions(t *testing.T) {
	cases := []struct {
		name string
		spec Spec
		want []decision
	}{
		{
			name: "zero spec sees nothing",
			spec: Spec{},
			want: []decision{
				{KindTools, "github", "github__create_issue", false},
				{KindResources, "files", "file:///a", false},
			},
		},
		{
			name: "no upstreams, default allow, still nothing",
			spec: Spec{Default: Allow},
			want: []decision{{KindTools, "github", "github__create_issue", false}},
		},
		{
			name: "all upstreams, default allow",
			spec: Spec{AllUpstreams: true, Default: Allow},
			want: []decision{
				{KindTools, "github", "github__create_issue", true},
				{KindPrompts, "jira", "jira__summary", true},
				{KindResources, "files", "file:///a", true},
				{KindResourceTemplates, "files", "file:///{path}", true},
			},
		},
		{
			name: "empty default is deny",
			spec: Spec{AllUpstreams: true},
			want: []decision{{KindTools, "github", "github__create_issue", false}},
		},
		{
			name: "explicit deny default",
			spec: Spec{AllUpstreams: true, Default: Deny, Rules: []Rule{{Allow, KindTools, "github__*"}}},
			want: []decision{
				{KindTools, "github", "github__create_issue", true},
				{KindTools, "jira", "jira__create_ticket", false},
			},
		},
		{
			name: "upstream set gates rules",
			spec: Spec{Upstreams: []string{"github"}, Default: Allow, Rules: []Rule{{Allow, "", "*"}}},
			want: []decision{
				{KindTools, "github", "github__create_issue", true},
				{KindTools, "jira", "jira__create_ticket", false},
				// A subject naming a visible upstream does not help an invisible one.
				{KindTools, "jira", "github__create_issue", false},
				{KindResources, "jira", "file:///a", false},
				{KindResources, "github", "file:///a", true},
			},
		},
		{
			name: "first match wins: allow before deny",
			spec: Spec{AllUpstreams: true, Default: Deny, Rules: []Rule{
				{Allow, KindTools, "github__get_*"},
				{Deny, KindTools, "github__*"},
				{Allow, KindTools, "*"},
			}},
			want: []decision{
				{KindTools, "github", "github__get_issue", true},
				{KindTools, "github", "github__create_issue", false},
				{KindTools, "jira", "jira__create_ticket", true},
			},
		},
		{
			name: "first match wins: deny before allow",
			spec: Spec{AllUpstreams: true, Default: Allow, Rules: []Rule{
				{Deny, KindTools, "*__delete_*"},
				{Allow, KindTools, "github__*"},
			}},
			want: []decision{
				{KindTools, "github", "github__delete_repo", false},
				{KindTools, "github", "github__get_issue", true},
				{KindTools, "jira", "jira__delete_ticket", false},
				{KindTools, "jira", "jira__get_ticket", true},
			},
		},
		{
			name: "rule kinds",
			spec: Spec{AllUpstreams: true, Default: Deny, Rules: []Rule{
				{Allow, KindPrompts, "github__*"},
				{Allow, KindResources, "file:///public/*"},
				{Allow, KindResourceTemplates, "file:///{path}"},
			}},
			want: []decision{
				{KindTools, "github", "github__create_issue", false},
				{KindPrompts, "github", "github__create_issue", true},
				{KindResources, "files", "file:///public/a/b", true},
				{KindResources, "files", "file:///private/a", false},
				// Resource rules apply to templates too; template rules only to templates.
				{KindResourceTemplates, "files", "file:///public/{name}", true},
				{KindResourceTemplates, "files", "file:///{path}", true},
				{KindResources, "files", "file:///{path}", false},
			},
		},
		{
			name: "empty kind applies to every kind",
			spec: Spec{AllUpstreams: true, Default: Allow, Rules: []Rule{{Deny, "", "*secret*"}}},
			want: []decision{
				{KindTools, "vault", "vault__read_secret", false},
				{KindPrompts, "vault", "vault__secret_help", false},
				{KindResources, "vault", "vault://secret/x", false},
				{KindResourceTemplates, "vault", "vault://secret/{k}", false},
				{KindTools, "vault", "vault__list", true},
			},
		},
		{
			name: "resource deny covers nested paths",
			spec: Spec{AllUpstreams: true, Default: Allow, Rules: []Rule{{Deny, KindResources, "file:///secret/*"}}},
			want: []decision{
				{KindResources, "files", "file:///secret/a/b/c", false},
				{KindResources, "files", "file:///secret", true},
				{KindResources, "files", "file:///secrets/x", true},
			},
		},
		{
			name: "unknown kind is denied",
			spec: Spec{AllUpstreams: true, Default: Allow},
			want: []decision{{"tool", "github", "github__x", false}, {"", "github", "github__x", false}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.spec)
			for _, d := range tc.want {
				if got := p.Allowed(d.kind, d.upstream, d.subject); got != d.want {
					t.Errorf("Allowed(%q, %q, %q) = %v, want %v", d.kind, d.upstream, d.subject, got, d.want)
				}
				b := p.Bind(d.kind, []Item{{Name: "n", Upstream: d.upstream, Subject: d.subject}})
				if got := b.Allowed("", "n"); got != d.want {
					t.Errorf("bound Allowed(%q, %q, %q) = %v, want %v", d.kind, d.upstream, d.subject, got, d.want)
				}
			}
		})
	}
}

func TestPolicyKindsMatchProto(t *testing.T) {
	for _, k := range proto.ListKinds {
		if kindIndex(Kind(k)) < 0 {
			t.Errorf("proto kind %q is unknown to policy", k)
		}
	}
}

func TestPolicyUpstream(t *testing.T) {
	p := mustCompile(t, Spec{Upstreams: []string{"a", "b", "a"}})
	for u, want := range map[string]bool{"a": true, "b": true, "c": false, "": false} {
		if got := p.Upstream(u); got != want {
			t.Errorf("Upstream(%q) = %v, want %v", u, got, want)
		}
	}
	if all := mustCompile(t, Spec{AllUpstreams: true}); !all.Upstream("anything") {
		t.Error("AllUpstreams: Upstream(anything) = false")
	}
}

func TestPolicyNilFailsClosed(t *testing.T) {
	var p *Policy
	if p.Upstream("a") || p.Allowed(KindTools, "a", "a__x") {
		t.Error("nil Policy allows")
	}
	b := p.Bind(KindTools, []Item{{Name: "a__x", Upstream: "a"}})
	if b.Allowed("a", "a__x") || b.Visible(0) || b.NumVisible() != 0 {
		t.Error("Bound of a nil Policy allows")
	}
	var nb *Bound
	if nb.Allowed("a", "a__x") || nb.Visible(0) || nb.Len() != 0 || len(nb.AppendVisible(nil, 0, -1)) != 0 {
		t.Error("nil Bound allows")
	}
}

func TestPolicyCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		spec Spec
		want []string // substrings, one per expected problem
	}{
		{"both upstream forms", Spec{AllUpstreams: true, Upstreams: []string{"a"}}, []string{"all_upstreams together"}},
		{"empty upstream", Spec{Upstreams: []string{""}}, []string{"empty upstream"}},
		{"bad default", Spec{Default: "maybe"}, []string{`default "maybe"`}},
		{"bad effect", Spec{Rules: []Rule{{"permit", KindTools, "*"}}}, []string{`rule 0: effect "permit"`}},
		{"bad kind", Spec{Rules: []Rule{{Allow, "tool", "*"}}}, []string{`rule 0: unknown kind "tool"`}},
		{"empty pattern", Spec{Rules: []Rule{{Allow, KindTools, ""}}}, []string{"rule 0: empty pattern"}},
		{"trailing backslash", Spec{Rules: []Rule{{Allow, KindTools, `a\`}}}, []string{"rule 0: pattern", "trailing backslash"}},
		{"invalid UTF-8", Spec{Rules: []Rule{{Allow, KindTools, "a\xff"}}}, []string{"not valid UTF-8"}},
		{"every problem reported", Spec{Default: "x", Rules: []Rule{{Allow, KindTools, ""}, {"x", KindTools, "*"}}},
			[]string{"default", "rule 0: empty pattern", "rule 1: effect"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.spec)
			if err == nil || p != nil {
				t.Fatalf("Compile = %v, %v; want an error", p, err)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("error %v does not wrap ErrInvalidSpec", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// catalog returns the 20×50 federated tool list of the benchmarks:
// upstreams u00…u19, each with tools <verb>_<noun>.
func catalog() []Item {
	verbs := []string{"get", "list", "create", "update", "delete"}
	var items []Item
	for u := range 20 {
		up := fmt.Sprintf("u%02d", u)
		for i := range 50 {
			name := fmt.Sprintf("%s__%s_thing%02d", up, verbs[i%len(verbs)], i)
			items = append(items, Item{Name: name, Upstream: up})
		}
	}
	return items
}

// denyByDefault sees 15 of the 20 upstreams and allows, by globs, every
// get and list tool, everything of u0? except deletes, and nothing else.
func denyByDefault() Spec {
	var ups []string
	for u := range 15 {
		ups = append(ups, fmt.Sprintf("u%02d", u))
	}
	return Spec{Upstreams: ups, Default: Deny, Rules: []Rule{
		{Deny, KindTools, "*__delete_*"},
		{Allow, KindTools, "u0?__*"},
		{Allow, KindTools, "*__get_*"},
		{Allow, KindTools, "*__list_*"},
		{Deny, "", "*secret*"},
	}}
}

func TestPolicyBind(t *testing.T) {
	p := mustCompile(t, denyByDefault())
	items := catalog()
	b := p.Bind(KindTools, items)
	if b.Len() != len(items) {
		t.Fatalf("Len = %d, want %d", b.Len(), len(items))
	}
	var want []int
	for i, it := range items {
		ok := p.Allowed(KindTools, it.Upstream, it.Name)
		if ok {
			want = append(want, i)
		}
		if b.Visible(i) != ok || b.Allowed(it.Upstream, it.Name) != ok {
			t.Errorf("%s: bound %v/%v, policy %v", it.Name, b.Visible(i), b.Allowed(it.Upstream, it.Name), ok)
		}
	}
	// u00-u09: 40 non-delete tools each; u10-u14: 20 get/list each.
	if len(want) != 10*40+5*20 || b.NumVisible() != len(want) {
		t.Errorf("visible = %d (NumVisible %d), want %d", len(want), b.NumVisible(), 10*40+5*20)
	}
	if got := p.AppendAllowed(nil, KindTools, items); !cmp.Equal(got, want) {
		t.Errorf("AppendAllowed differs from Allowed: %s", cmp.Diff(want, got))
	}
	if got := b.AppendVisible(nil, 0, -1); !cmp.Equal(got, want) {
		t.Errorf("AppendVisible differs from Allowed: %s", cmp.Diff(want, got))
	}
	// Pages from any start, mid-word included, of any size.
	for _, r := range [][2]int{{-5, 3}, {0, 0}, {63, 2}, {64, 64}, {100, 100}, {990, 100}, {999, 1}, {1000, 5}, {5000, -1}, {7, -1}} {
		var w []int
		for _, i := range want {
			if i >= r[0] && (r[1] < 0 || len(w) < r[1]) {
				w = append(w, i)
			}
		}
		if got := b.AppendVisible(nil, r[0], r[1]); !cmp.Equal(got, w) {
			t.Errorf("AppendVisible(%d, %d): %s", r[0], r[1], cmp.Diff(w, got))
		}
	}
	// Paging through the list visits every visible item once.
	var paged []int
	for next, buf := 0, make([]int, 0, 64); ; {
		buf = b.AppendVisible(buf[:0], next, 64)
		if len(buf) == 0 {
			break
		}
		paged = append(paged, buf...)
		next = buf[len(buf)-1] + 1
	}
	if !cmp.Equal(paged, want) {
		t.Errorf("paging: %s", cmp.Diff(want, paged))
	}
	if b.Visible(-1) || b.Visible(len(items)) {
		t.Error("Visible out of range = true")
	}
}

func TestPolicyBindSubjectAndFallback(t *testing.T) {
	p := mustCompile(t, Spec{Upstreams: []string{"github", "files"}, Default: Deny, Rules: []Rule{
		{Allow, KindTools, "github__get_*"},
		{Allow, KindResources, "file:///public/*"},
	}})
	// A shortened federated name and a passthrough view's bare name are
	// decided by their canonical subject.
	tools := p.Bind(KindTools, []Item{
		{Name: "github__get_a_very_long_na-1a2b3c4d", Upstream: "github", Subject: "github__get_a_very_long_name"},
		{Name: "create_issue", Upstream: "github", Subject: "github__create_issue"},
		{Name: "get_issue", Upstream: "github", Subject: "github__get_issue"},
	})
	for name, want := range map[string]bool{
		"github__get_a_very_long_na-1a2b3c4d": true,
		"create_issue":                        false,
		"get_issue":                           true,
	} {
		if got := tools.Allowed("github", name); got != want {
			t.Errorf("tools: Allowed(%q) = %v, want %v", name, got, want)
		}
	}
	// Unbound names fall back to the globs with name as the subject: a URI
	// read through a template is never listed.
	res := p.Bind(KindResources, []Item{{Name: "file:///public/index", Upstream: "files"}})
	for _, c := range []struct {
		upstream, uri string
		want          bool
	}{
		{"files", "file:///public/index", true},
		{"files", "file:///public/deep/er", true},
		{"files", "file:///private/x", false},
		{"other", "file:///public/deep/er", false},
	} {
		if got := res.Allowed(c.upstream, c.uri); got != c.want {
			t.Errorf("resources: Allowed(%q, %q) = %v, want %v", c.upstream, c.uri, got, c.want)
		}
	}
	// Duplicate names: the first decides lookups, indexes keep their own.
	dup := p.Bind(KindTools, []Item{
		{Name: "x", Upstream: "github", Subject: "github__get_x"},
		{Name: "x", Upstream: "github", Subject: "github__create_x"},
	})
	if !dup.Allowed("github", "x") || !dup.Visible(0) || dup.Visible(1) {
		t.Error("duplicate names: want the first to decide lookups")
	}
	if unk := p.Bind("tool", []Item{{Name: "github__get_x", Upstream: "github"}}); unk.NumVisible() != 0 || unk.Allowed("github", "github__get_y") {
		t.Error("unknown kind: want nothing visible")
	}
}

// TestPolicyConcurrent shares one Policy and Bound across goroutines; run
// with -race.
func TestPolicyConcurrent(t *testing.T) {
	p := mustCompile(t, denyByDefault())
	items := catalog()
	b := p.Bind(KindTools, items)
	want := b.NumVisible()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n := 0
			for i, it := range items {
				if b.Allowed(it.Upstream, it.Name) && p.Allowed(KindTools, it.Upstream, it.Name) && b.Visible(i) {
					n++
				}
			}
			if n != want {
				t.Errorf("visible = %d, want %d", n, want)
			}
		})
	}
	wg.Wait()
}
