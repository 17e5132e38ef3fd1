package bus

import "sync/atomic"

// PlacementScore is the rendezvous weight of a worker for a (session,
// upstream) pair: FNV-64a over the tokens, finalized with splitmix64. A
// session's calls to an upstream go to the live worker with the highest
// score, so every router and every edge holding a route grant
// ([proto.RouteGrant]) places them on the same worker without talking to
// each other.
func PlacementScore(edge, session, upstream, worker string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, s := range [...]string{edge, session, upstream, worker} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= prime
		}
		h ^= 0xff
		h *= prime
	}
	// FNV's low bits mix poorly for short inputs; finalize (splitmix64).
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// Place returns the index in workers (live workers of upstream) of the one
// a call goes to: the highest [PlacementScore] for a call of a session, else
// the next in round-robin order by rr. It returns -1 when workers is empty.
// Safe for concurrent use when rr is shared.
func Place(workers []string, edge, session, upstream string, rr *atomic.Uint64) int {
	if len(workers) == 0 {
		return -1
	}
	if session == "" {
		return int(rr.Add(1) % uint64(len(workers)))
	}
	best, bestScore := 0, uint64(0)
	for i, w := range workers {
		if sc := PlacementScore(edge, session, upstream, w); i == 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best
}
