package names

import (
	"fmt"
	"strings"
	"testing"
)

func TestNamesAssign(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name  string
		pairs []Pair
		sep   string
		want  map[Pair]string // "" means: a valid short form, checked generically
	}{
		{"direct", []Pair{{"a", "echo"}, {"b", "echo"}}, "__", map[Pair]string{{"a", "echo"}: "a__echo", {"b", "echo"}: "b__echo"}},
		{"dotted tool", []Pair{{"a", "fs.read"}}, "__", map[Pair]string{{"a", "fs.read"}: ""}},
		{"too long", []Pair{{"a", long}}, "__", map[Pair]string{{"a", long}: ""}},
		{"separator collision", []Pair{{"a", "b-c"}, {"a-b", "c"}}, "-", map[Pair]string{{"a", "b-c"}: "", {"a-b", "c"}: ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Assign(tc.pairs, tc.sep)
			seen := map[string]bool{}
			for p, want := range tc.want {
				n := got[p]
				if !Valid(n) {
					t.Fatalf("%v -> %q: not a valid name", p, n)
				}
				if want != "" && n != want {
					t.Errorf("%v -> %q, want %q", p, n, want)
				}
				if seen[n] {
					t.Errorf("%q assigned twice", n)
				}
				seen[n] = true
			}
		})
	}
}

func TestNamesAssignDeterministicAndUnique(t *testing.T) {
	var pairs []Pair
	for u := range 20 {
		for i := range 50 {
			pairs = append(pairs, Pair{fmt.Sprintf("up-%d", u), fmt.Sprintf("tool.%d/%s", i, strings.Repeat("y", i*2))})
		}
	}
	a := Assign(pairs, "__")
	rev := make([]Pair, len(pairs))
	for i, p := range pairs {
		rev[len(pairs)-1-i] = p
	}
	b := Assign(rev, "__")
	seen := map[string]bool{}
	for _, p := range pairs {
		if a[p] != b[p] {
			t.Fatalf("%v: %q vs %q depending on order", p, a[p], b[p])
		}
		if !Valid(a[p]) || seen[a[p]] {
			t.Fatalf("%v: %q invalid or duplicate", p, a[p])
		}
		seen[a[p]] = true
	}
}

func TestNamesShortFormCollision(t *testing.T) {
	// Force a collision: a direct name equal to another pair's short form.
	p := Pair{"a", "b.c"}
	sf := shortForm(p, "__", 0)
	tool := strings.TrimPrefix(sf, "a__")
	got := Assign([]Pair{p, {"a", tool}}, "__")
	if got[p] == got[Pair{"a", tool}] {
		t.Fatalf("collision not resolved: both %q", got[p])
	}
}

func BenchmarkNamesAssign(b *testing.B) {
	var pairs []Pair
	for u := range 20 {
		for i := range 50 {
			pairs = append(pairs, Pair{fmt.Sprintf("up-%d", u), fmt.Sprintf("tool-%d", i)})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		Assign(pairs, "__")
	}
}
