package policy

import "testing"

// BenchmarkPolicyDecision measures one decision on the 20×50 catalog with
// the deny-by-default globs: path=bound is the map lookup of a bound name,
// path=index the bit test by list index, path=globs the pattern
// evaluation of an unbound name (allowed by the third rule, after two
// misses), path=globs-default one that no rule matches.
func BenchmarkPolicyDecision(b *testing.B) {
	p := mustCompile(b, denyByDefault())
	items := catalog()
	bound := p.Bind(KindTools, items)
	const name, up = "u12__get_thing10", "u12"
	if !bound.Allowed(up, name) || !p.Allowed(KindTools, up, name) || p.Allowed(KindTools, "u12", "u12__create_thing02") {
		b.Fatal("fixture decisions changed")
	}
	var sink bool
	b.Run("path=bound", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = bound.Allowed(up, name)
		}
	})
	b.Run("path=index", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = bound.Visible(610)
		}
	})
	b.Run("path=globs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = p.Allowed(KindTools, up, name)
		}
	})
	b.Run("path=globs-default", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = p.Allowed(KindTools, up, "u12__create_thing02")
		}
	})
	_ = sink
}

// BenchmarkPolicyFilter filters the whole 20×50 catalog (1,000 tools)
// with the deny-by-default globs into a reused buffer: path=bound from a
// Bound's bitmap, path=globs by evaluating every item's patterns.
// path=bind is the one-off cost of binding the list (it allocates the map
// and bitmap; it runs once per policy and catalog snapshot).
func BenchmarkPolicyFilter(b *testing.B) {
	p := mustCompile(b, denyByDefault())
	items := catalog()
	bound := p.Bind(KindTools, items)
	dst := make([]int, 0, len(items))
	b.Run("catalog=20x50/path=bound", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dst = bound.AppendVisible(dst[:0], 0, -1)
		}
	})
	b.Run("catalog=20x50/path=globs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dst = p.AppendAllowed(dst[:0], KindTools, items)
		}
	})
	b.Run("catalog=20x50/path=bind", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bound = p.Bind(KindTools, items)
		}
	})
	if len(dst) != 500 {
		b.Fatalf("visible = %d, want 500", len(dst))
	}
}
