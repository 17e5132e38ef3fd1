package limit

import (
	"math"
	"slices"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
)

// View is the fleet of edges as one edge sees it: Members sorted, without
// duplicates, Self among them at index Rank. A View is immutable once
// published; a new membership is a new View, so a pointer comparison tells
// whether it changed.
type View struct {
	Self    string
	Members []string
	Rank    int
}

// N is the number of live edges, at least 1.
func (v *View) N() int { return len(v.Members) }

// NewView returns the View of self among members (self is added if
// missing; duplicates are dropped). It does not keep members.
func NewView(self string, members []string) *View {
	m := make([]string, 0, len(members)+1)
	m = append(m, members...)
	m = append(m, self)
	slices.Sort(m)
	m = slices.Compact(m)
	r, _ := slices.BinarySearch(m, self)
	return &View{Self: self, Members: m, Rank: r}
}

// alone is the View of an edge that counts itself alone.
var alone = NewView("", nil)

// Membership is where a [Limiter] reads the fleet's current View: a
// [*Fleet] in production, [Fixed] in tests. View must be safe for
// concurrent use, never return nil, not allocate, and return the same
// pointer while the membership is unchanged.
type Membership interface {
	View() *View
}

// Fixed is a Membership that always returns V (nil: alone).
type Fixed struct{ V *View }

// View returns f.V, or the View of a lone edge if it is nil.
func (f Fixed) View() *View {
	if f.V == nil {
		return alone
	}
	return f.V
}

// Share is one edge's part of a tenant's limits. Rates are requests per
// second, with 0 meaning unlimited; MaxInFlight < 0 means unlimited and 0
// means this edge admits no call of the tenant.
type Share struct {
	Rate           float64
	Burst          int
	PrincipalRate  float64
	PrincipalBurst int
	MaxInFlight    int
}

// TenantShare returns the share of lim that the edge ranked v.Rank among
// v.N() edges enforces for tenant (the principal burst is per principal:
// see [PrincipalBurst]).
//
// Rates are divided equally: rate/n, so the edges' rates sum to the
// tenant's. Bursts and MaxInFlight, integers, are divided as floor(x/n),
// plus one on x%n of the edges, so they sum to x exactly; which edges get
// the extra one rotates with a hash of the tenant's name, so that the
// same low-ranked edge is not favoured for every tenant. A burst share is
// at least 1, since a bucket with burst 0 never admits anything: with
// fewer burst tokens than edges, the fleet's burst is n instead of burst.
// A MaxInFlight share may be 0: that edge refuses the tenant's calls.
//
// A zero burst with a rate means one second's worth: max(1, ceil(rate)).
// A rate that is zero, negative, NaN or infinite is unlimited (the
// tenancy records never hold the last three).
func TenantShare(lim tenancy.Limits, v *View, tenant string) Share {
	n, h := v.N(), hashString(fnvOffset, tenant)
	s := Share{MaxInFlight: -1}
	if r, b, ok := bucket(lim.Rate, lim.Burst); ok {
		s.Rate = r / float64(n)
		s.Burst = max(1, split(b, n, slot(v.Rank, n, h)))
	}
	if r, _, ok := bucket(lim.PrincipalRate, lim.PrincipalBurst); ok {
		s.PrincipalRate = r / float64(n)
	}
	if lim.MaxInFlight > 0 {
		s.MaxInFlight = split(lim.MaxInFlight, n, slot(v.Rank, n, h))
	}
	return s
}

// SessionShare returns the edge's share of lim.MaxSessions, divided as
// [TenantShare] divides MaxInFlight (the shares sum to it; one may be 0),
// or -1 if lim sets no session cap.
func SessionShare(lim tenancy.Limits, v *View, tenant string) int {
	if lim.MaxSessions <= 0 {
		return -1
	}
	n := v.N()
	return split(lim.MaxSessions, n, slot(v.Rank, n, hashString(fnvOffset, tenant)))
}

// PrincipalBurst returns the edge's share of a principal's burst, divided
// as [TenantShare] divides the tenant's (at least 1; the extra tokens
// rotate with a hash of tenant and principal), or 0 if lim sets no
// principal rate.
func PrincipalBurst(lim tenancy.Limits, v *View, tenant, principal string) int {
	_, b, ok := bucket(lim.PrincipalRate, lim.PrincipalBurst)
	if !ok {
		return 0
	}
	return principalBurst(b, v, principalHash(tenant, principal))
}

func principalBurst(b int, v *View, h uint32) int {
	return max(1, split(b, v.N(), slot(v.Rank, v.N(), h)))
}

// bucket returns the rate and burst of a token bucket, ok false if the
// rate is unlimited.
func bucket(rate float64, burst int) (r float64, b int, ok bool) {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return 0, 0, false
	}
	if burst <= 0 {
		burst = int(min(math.Ceil(rate), math.MaxInt32))
	}
	return rate, max(1, burst), true
}

// split returns the part of total that the edge in slot s of n gets:
// total/n, plus one for the first total%n slots.
func split(total, n, s int) int {
	q := total / n
	if s < total%n {
		q++
	}
	return q
}

// slot rotates rank by h so that the extra units of [split] land on
// different edges for different tenants, while every edge, computing the
// same h, agrees on who gets them.
func slot(rank, n int, h uint32) int {
	return (rank + n - int(h%uint32(n))) % n
}

// FNV-1a, 32 bits: stable across processes (unlike hash/maphash, which is
// seeded per process), which every edge needs to agree on the rotation.
const (
	fnvOffset uint32 = 2166136261
	fnvPrime  uint32 = 16777619
)

func hashString(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime
	}
	return h
}

func principalHash(tenant, principal string) uint32 {
	return hashString(hashString(hashString(fnvOffset, tenant), "\x00"), principal)
}
