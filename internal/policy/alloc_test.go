//go:build !race

package policy

import "testing"

// TestPolicyZeroAllocs pins the hot path's allocation count (the race
// detector's instrumentation may allocate, hence the build tag).
func TestPolicyZeroAllocs(t *testing.T) {
	p := mustCompile(t, denyByDefault())
	items := catalog()
	b := p.Bind(KindTools, items)
	dst := make([]int, 0, len(items))
	checks := map[string]func(){
		"bound":    func() { b.Allowed("u12", "u12__get_thing10") },
		"fallback": func() { b.Allowed("u12", "u12__get_unlisted") },
		"globs":    func() { p.Allowed(KindTools, "u12", "u12__create_thing02") },
		"index":    func() { b.Visible(610) },
		"filter":   func() { dst = b.AppendVisible(dst[:0], 0, -1) },
		"filter-globs": func() {
			dst = p.AppendAllowed(dst[:0], KindTools, items)
		},
	}
	for name, fn := range checks {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
