//go:build !race

package tenancy

import (
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

// TestTenancySnapshotZeroAllocs pins the hot lookups' allocation count
// (the race detector's instrumentation may allocate, hence the build tag).
func TestTenancySnapshotZeroAllocs(t *testing.T) {
	key, rec := newKey(t, "acme", "alice")
	unknown, _ := newKey(t, "acme", "bob")
	s := NewSnapshot([]Tenant{claimTenant("acme")}, []apikey.Record{rec})
	p := orgPrincipal("acme")
	now := time.Now()
	checks := map[string]func(){
		"ResolveKey":         func() { _, _, _ = s.ResolveKey(key, now) },
		"ResolveKey/unknown": func() { _, _, _ = s.ResolveKey(unknown, now) },
		"ResolveKey/bad":     func() { _, _, _ = s.ResolveKey("syk_short", now) },
		"Tenant":             func() { _, _, _ = s.Tenant("acme") },
		"Anonymous":          func() { _, _ = s.Anonymous() },
		"ResolvePrincipal":   func() { _, _ = s.ResolvePrincipal(p) },
	}
	for name, fn := range checks {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
