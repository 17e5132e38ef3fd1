package edge

import (
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

func TestJWTCache(t *testing.T) {
	var c jwtCache
	now := time.Unix(1_000_000, 0)
	p := &tenant.Principal{Issuer: "https://idp", Claims: []tenant.Claim{{Name: "sub", Value: "alice"}}}
	k := jwtCacheKey("http://gw/mcp", "tok")
	if k == jwtCacheKey("http://gw/mcp/up", "tok") || k == jwtCacheKey("http://gw/mcp", "tok2") {
		t.Fatal("the key must depend on the resource and the token")
	}
	c.put(k, p, now.Add(time.Hour), now, 7)
	p.Claims[0].Value = "mallory" // the cache holds its own copy
	for _, tc := range []struct {
		name string
		at   time.Time
		keys uint64
		hit  bool
	}{
		{"fresh", now.Add(time.Second), 7, true},
		{"key sets replaced", now.Add(time.Second), 8, false},
		{"past the TTL", now.Add(jwtCacheTTL), 7, false},
	} {
		got := c.get(k, tc.at, tc.keys)
		if (got != nil) != tc.hit {
			t.Fatalf("%s: hit %v, want %v", tc.name, got != nil, tc.hit)
		}
		if got != nil && got.Claims[0].Value != "alice" {
			t.Fatalf("%s: cached principal changed: %+v", tc.name, got)
		}
	}
	// A token expiring before the TTL is kept only until its exp.
	k2 := jwtCacheKey("r", "short")
	c.put(k2, p, now.Add(time.Second), now, 7)
	if c.get(k2, now.Add(time.Second), 7) != nil {
		t.Fatal("served past the token's exp")
	}
	// Bounded.
	for i := range 2 * jwtCacheMax {
		c.put(jwtCacheKey("r", strconv.Itoa(i)), p, time.Time{}, now, 7)
	}
	if n := len(c.m); n > jwtCacheMax {
		t.Fatalf("%d entries, want at most %d", n, jwtCacheMax)
	}
}
