package tenancy

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

// benchSnapshot has n tenants with one key each; it returns the keys.
func benchSnapshot(b *testing.B, n int) (*Snapshot, []string) {
	ts := make([]Tenant, n)
	recs := make([]apikey.Record, n)
	keys := make([]string, n)
	for i := range ts {
		ts[i] = claimTenant(fmt.Sprintf("tenant-%d", i))
		keys[i], recs[i] = newKey(b, ts[i].Name, "svc")
	}
	s := NewSnapshot(ts, recs)
	if p := s.Problems(); len(p) > 0 {
		b.Fatal(p)
	}
	return s, keys
}

// BenchmarkTenancyResolveKey is API key authentication against a
// snapshot: parse, lookup by id, SHA-256 and constant-time compare, tenant
// check.
func BenchmarkTenancyResolveKey(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, keys := benchSnapshot(b, n)
			now := time.Now()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, _, err := s.ResolveKey(keys[i], now); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}
}

func BenchmarkTenancySnapshotTenant(b *testing.B) {
	s, _ := benchSnapshot(b, 10000)
	names := make([]string, 1024)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%d", i*7%10000)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, p, ok := s.Tenant(names[i]); !ok || p == nil {
			b.Fatal("missing")
		}
		i = (i + 1) & (len(names) - 1)
	}
}
