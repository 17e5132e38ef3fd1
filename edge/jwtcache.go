package edge

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// A JWT's signature check costs ~100 us (RS256) and every request of a
// client repeats the same token, so the edge keeps verified tokens for a
// short while, and only while the issuers' key sets are the ones that
// verified them (a refreshed JWKS without the key refuses its tokens at
// once). The cache holds the principal a token verified to, not the
// tenant: tenant resolution (fast, indexed) runs against the current
// tenancy snapshot on every request, so a selector change applies at once.
const (
	// jwtCacheTTL bounds how long a verified token is trusted without
	// checking it again (and each token ends at its exp).
	jwtCacheTTL = 30 * time.Second
	// jwtCacheMax bounds the entries (~300 B each).
	jwtCacheMax = 8192
)

// jwtCache maps SHA-256(resource, token) to the principal the token
// verified to at that resource (its audience check depends on it). Keys
// are hashes, so the cache holds no token. Safe for concurrent use.
type jwtCache struct {
	mu sync.RWMutex
	m  map[[32]byte]*cachedJWT // guarded by mu
}

type cachedJWT struct {
	p     tenant.Principal // deep copy; read-only once stored
	until time.Time
	keys  uint64 // the verifier's KeySetID when it verified
}

func jwtCacheKey(resource, token string) [32]byte {
	h := sha256.New()
	h.Write([]byte(resource))
	h.Write([]byte{0})
	h.Write([]byte(token))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// get returns the cached principal of key, or nil if none is valid at now
// under the key sets keys (jwtauth.Verifier.KeySetID).
func (c *jwtCache) get(key [32]byte, now time.Time, keys uint64) *tenant.Principal {
	c.mu.RLock()
	e := c.m[key]
	c.mu.RUnlock()
	if e == nil || !now.Before(e.until) || e.keys != keys {
		return nil
	}
	return &e.p
}

// put stores a copy of p for key until the earlier of exp and now+TTL.
func (c *jwtCache) put(key [32]byte, p *tenant.Principal, exp, now time.Time, keys uint64) {
	until := now.Add(jwtCacheTTL)
	if !exp.IsZero() && exp.Before(until) {
		until = exp
	}
	e := &cachedJWT{until: until, keys: keys, p: tenant.Principal{
		Issuer: p.Issuer, Claims: slices.Clone(p.Claims), Groups: slices.Clone(p.Groups), Scopes: slices.Clone(p.Scopes),
	}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*cachedJWT{}
	}
	if len(c.m) >= jwtCacheMax {
		c.evict(now)
	}
	c.m[key] = e
}

// evict drops expired entries and, if that frees too little, an eighth of
// the rest (map order: arbitrary). Called with mu held.
func (c *jwtCache) evict(now time.Time) {
	for k, e := range c.m {
		if !now.Before(e.until) {
			delete(c.m, k)
		}
	}
	for k := range c.m {
		if len(c.m) < jwtCacheMax-jwtCacheMax/8 {
			return
		}
		delete(c.m, k)
	}
}
