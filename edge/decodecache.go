package edge

import (
	"encoding/json"
	"sync"
)

// decodeCache remembers JSON values, by their exact bytes, that decode
// into a type without error, so that a value a client sends on every
// request (a 2026-era request's clientCapabilities and clientInfo, SEP-2575)
// is decoded once rather than on every call. Whether bytes decode is a
// fixed fact of the bytes, so a hit needs no expiry. Only successes are
// kept: a value that fails is decoded again each time, as it would be
// without the cache.
//
// Bounds: values longer than decodeCacheMaxValue are never kept, and the
// cache is emptied when it reaches decodeCacheMaxEntries (at most
// 256 × 4 KiB held). Safe for concurrent use.
type decodeCache struct {
	decode func([]byte) error

	mu sync.RWMutex
	ok map[string]struct{} // guarded by mu
}

const (
	decodeCacheMaxEntries = 256
	decodeCacheMaxValue   = 4 << 10
)

func newDecodeCache[T any]() *decodeCache {
	return &decodeCache{
		decode: func(b []byte) error { var v T; return json.Unmarshal(b, &v) },
		ok:     make(map[string]struct{}),
	}
}

// valid reports whether b decodes into the cache's type.
func (c *decodeCache) valid(b []byte) bool {
	c.mu.RLock()
	_, hit := c.ok[string(b)]
	c.mu.RUnlock()
	if hit {
		return true
	}
	if c.decode(b) != nil {
		return false
	}
	if len(b) <= decodeCacheMaxValue {
		c.mu.Lock()
		if len(c.ok) >= decodeCacheMaxEntries {
			clear(c.ok)
		}
		c.ok[string(b)] = struct{}{}
		c.mu.Unlock()
	}
	return true
}

// len is the number of values kept.
func (c *decodeCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.ok)
}
