package edge

import (
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// dropCount is the cache's drop count, as routeOf reads it with a lookup.
func dropCount(c *routeCache) uint64 {
	_, g := c.get(routeKey{}, time.Time{})
	return g
}

func grantBytes(t *testing.T, g proto.RouteGrant) []byte {
	t.Helper()
	b, err := proto.Marshal(&g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRouteCache: a stored grant is served until its TTL; a grant read
// before a drop of every grant is not stored; unusable grants are refused.
func TestRouteCache(t *testing.T) {
	now := time.Unix(1000, 0)
	ok := proto.RouteGrant{Upstream: "a", Name: "echo", Workers: []string{"w-1", "w-2"}, Token: []byte("mac")}
	key := routeKey{"t", "", "a__echo"}

	c := newRouteCache(time.Second)
	gen := dropCount(c)
	if !c.put(key, gen, grantBytes(t, ok), now) {
		t.Fatal("a usable grant was not stored")
	}
	g, _ := c.get(key, now.Add(999*time.Millisecond))
	if g == nil || g.upstream != "a" || g.name != "echo" || len(g.subjects) != 2 ||
		g.subjects[1] != "switchyard.v1.grant.w-2.tools_call" || string(g.token) != "mac" {
		t.Fatalf("get = %+v", g)
	}
	if g, _ := c.get(key, now.Add(time.Second)); g != nil {
		t.Fatal("grant served past its TTL")
	}

	// A grant that was on its way while every grant was dropped.
	gen = dropCount(c)
	c.dropAll()
	if c.put(key, gen, grantBytes(t, ok), now) {
		t.Fatal("a grant read before dropAll was stored")
	}
	if g, _ := c.get(key, now); g != nil {
		t.Fatal("grant served after dropAll")
	}

	// drop forgets only the grant it was given.
	gen = dropCount(c)
	c.put(key, gen, grantBytes(t, ok), now)
	first, _ := c.get(key, now)
	c.put(key, gen, grantBytes(t, ok), now)
	c.drop(key, first)
	if g, _ := c.get(key, now); g == nil {
		t.Fatal("drop of a replaced grant removed its successor")
	}

	for _, bad := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not msgpack", []byte{0xc1, 0x00}},
		{"no workers", grantBytes(t, proto.RouteGrant{Upstream: "a", Name: "echo", Token: []byte("mac")})},
		{"no upstream", grantBytes(t, proto.RouteGrant{Name: "echo", Workers: []string{"w-1"}, Token: []byte("mac")})},
		{"worker not a token", grantBytes(t, proto.RouteGrant{Upstream: "a", Name: "echo", Workers: []string{"w.1"}, Token: []byte("mac")})},
		{"no router token (a worker would refuse the calls)", grantBytes(t, proto.RouteGrant{Upstream: "a", Name: "echo", Workers: []string{"w-1"}})},
	} {
		if c.put(routeKey{"t", "", bad.name}, dropCount(c), bad.data, now) {
			t.Errorf("%s: grant stored", bad.name)
		}
	}

	off := newRouteCache(-1)
	if off.put(key, dropCount(off), grantBytes(t, ok), now) {
		t.Fatal("a cache that is off stored a grant")
	}
}

// TestRouteCacheBounded: past maxRouteGrants the cache starts again.
func TestRouteCacheBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newRouteCache(time.Second)
	data := grantBytes(t, proto.RouteGrant{Upstream: "a", Name: "echo", Workers: []string{"w-1"}, Token: []byte("mac")})
	for i := range maxRouteGrants + 1 {
		c.put(routeKey{"t", "", strconv.Itoa(i)}, dropCount(c), data, now)
	}
	c.mu.Lock()
	n := len(c.grants)
	c.mu.Unlock()
	if n > maxRouteGrants {
		t.Fatalf("%d grants held, bound %d", n, maxRouteGrants)
	}
}
