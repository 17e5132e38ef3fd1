package limit

import (
	"strconv"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
)

// BenchmarkAdmit measures one admission within limits and its Done, on
// the real clock: limits=none (all unlimited: the in-flight count only),
// limits=all (tenant and principal rates and in-flight), principals=10000
// (limits=all, cycling through 10,000 known principals), fleet=3 (a third
// of the limits), and parallel (limits=all, GOMAXPROCS goroutines, one
// tenant, 64 principals).
func BenchmarkAdmit(b *testing.B) {
	// Buckets far from empty and far from full: within limits, and not idle.
	all := tenancy.Limits{Rate: 1, Burst: 1 << 30, PrincipalRate: 1, PrincipalBurst: 1 << 30, MaxInFlight: 1 << 20}
	run := func(b *testing.B, l *Limiter, lim tenancy.Limits, principals []string) {
		for _, p := range principals { // first sight allocates; not measured
			tk, err := l.Admit("acme", lim, p)
			if err != nil {
				b.Fatal(err)
			}
			tk.Done()
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tk, err := l.Admit("acme", lim, principals[i])
			if err != nil {
				b.Fatal(err)
			}
			tk.Done()
			if i++; i == len(principals) {
				i = 0
			}
		}
	}
	one := []string{"alice"}
	many := make([]string, 10000)
	for i := range many {
		many[i] = "principal-" + strconv.Itoa(i)
	}
	newL := func(b *testing.B, cfg Config) *Limiter {
		l, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	b.Run("limits=none", func(b *testing.B) { run(b, newL(b, Config{}), tenancy.Limits{}, one) })
	b.Run("limits=all", func(b *testing.B) { run(b, newL(b, Config{}), all, one) })
	b.Run("principals=10000", func(b *testing.B) { run(b, newL(b, Config{}), all, many) })
	b.Run("fleet=3", func(b *testing.B) {
		v := NewView("edge-b", []string{"edge-a", "edge-c"})
		run(b, newL(b, Config{Fleet: Fixed{V: v}}), all, one)
	})
	b.Run("parallel", func(b *testing.B) {
		l := newL(b, Config{})
		ps := many[:64]
		for _, p := range ps {
			tk, _ := l.Admit("acme", all, p)
			tk.Done()
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				tk, err := l.Admit("acme", all, ps[i%len(ps)])
				if err != nil {
					b.Error(err)
					return
				}
				tk.Done()
				i++
			}
		})
	})
}
