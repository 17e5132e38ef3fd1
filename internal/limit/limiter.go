package limit

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The limits a [proto.CodeLimited] error names in its Data ("limit").
const (
	LimitTenantRate    = "tenant_rate"
	LimitPrincipalRate = "principal_rate"
	LimitInFlight      = "in_flight"
	LimitSessions      = "sessions"
)

// Defaults of [Config].
const (
	DefaultMaxPrincipals      = 10000
	DefaultInFlightRetryAfter = 100 * time.Millisecond
)

// sweepEvery is how old the last sweep of a tenant's principals may be
// before a new principal triggers another, so that idle entries go even
// when the table does not grow.
const sweepEvery = time.Minute

// maxRetryAfter caps the hint: a tiny rate share would otherwise ask for
// waits that mean nothing to a client.
const maxRetryAfter = time.Hour

// Config tunes a [Limiter]. The zero value counts the edge alone.
type Config struct {
	// Fleet gives the edge's View of the fleet, read on every Admit; a
	// change applies to each tenant on its next Admit. Nil: the edge
	// counts itself alone (n=1) and enforces the whole limits.
	Fleet Membership
	// MaxPrincipals bounds the per-principal buckets kept per tenant.
	// Idle ones (refilled to their burst, so no different from a new
	// one) are dropped as the table grows; past MaxPrincipals busy
	// principals, the least recently seen are dropped too and would get
	// a fresh burst. Zero means [DefaultMaxPrincipals].
	MaxPrincipals int
	// InFlightRetryAfter is the retry hint of an in_flight refusal,
	// which no bucket can predict. Zero means [DefaultInFlightRetryAfter].
	InFlightRetryAfter time.Duration
	// Now is the clock of the token buckets. Nil means time.Now; tests
	// pass a fake one.
	Now func() time.Time
}

// Limiter admits or refuses requests against each tenant's limits, per
// edge: its share of them under [Config.Fleet] ([TenantShare]).
//
// For each tenant it keeps a token bucket (Rate, Burst), one bucket per
// principal (PrincipalRate, PrincipalBurst; the anonymous principal ""
// is one principal, shared by every anonymous client of the tenant), and
// a count of admitted calls not yet Done (MaxInFlight). The count is kept
// even while MaxInFlight is unlimited, so that a later limit counts the
// calls already running. A tenant's state lives as long as the Limiter,
// or until [Limiter.Sweep] finds it idle.
//
// All methods are safe for concurrent use. Admits of one tenant are
// serialized by a per-tenant mutex held for about a hundred nanoseconds;
// different tenants do not contend, except on a read lock of the tenant
// table.
type Limiter struct {
	fleet         Membership
	maxPrincipals int
	inFlightHint  time.Duration
	now           func() time.Time

	mu      sync.RWMutex
	tenants map[string]*tenantState // guarded by mu
}

// tenantState is one tenant's buckets and in-flight count.
type tenantState struct {
	name  string
	hash  uint32
	calls atomic.Int64 // admitted, not yet Done; incremented under mu only

	mu         sync.Mutex // guards the fields below and the buckets' use
	dead       bool       // swept: Admit must look the tenant up again
	lim        tenancy.Limits
	view       *View
	gen        uint64 // bumped when lim or view changes
	share      Share
	pburst     int           // principal burst before division (0: no principal rate)
	now        time.Time     // latest time given to the buckets
	bucket     *rate.Limiter // nil: no tenant rate
	principals map[string]*principalState
	nextSweep  int
	lastSweep  time.Time
}

// principalState is one principal's bucket; guarded by its tenant's mu.
type principalState struct {
	bucket *rate.Limiter
	hash   uint32
	gen    uint64    // the tenant gen the bucket was set for
	last   time.Time // last admission, for the least-recently-seen drop
}

// New returns a Limiter. It returns an error for a negative
// MaxPrincipals or InFlightRetryAfter.
func New(cfg Config) (*Limiter, error) {
	if cfg.MaxPrincipals < 0 || cfg.InFlightRetryAfter < 0 {
		return nil, errors.New("limit: max principals and in-flight retry hint must not be negative")
	}
	l := &Limiter{
		fleet:         cfg.Fleet,
		maxPrincipals: cfg.MaxPrincipals,
		inFlightHint:  cfg.InFlightRetryAfter,
		now:           cfg.Now,
		tenants:       map[string]*tenantState{},
	}
	if l.fleet == nil {
		l.fleet = Fixed{}
	}
	if l.maxPrincipals == 0 {
		l.maxPrincipals = DefaultMaxPrincipals
	}
	if l.inFlightHint == 0 {
		l.inFlightHint = DefaultInFlightRetryAfter
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l, nil
}

// Ticket is an admitted call. Done ends it; the zero Ticket's Done does
// nothing.
type Ticket struct{ t *tenantState }

// Done releases the call's in-flight slot. Call it once, when the call
// is answered, failed or abandoned; a second Done on the same Ticket
// variable does nothing, but Done on a copy counts again. Safe for
// concurrent use with Admit.
func (k *Ticket) Done() {
	if k.t != nil {
		k.t.calls.Add(-1)
		k.t = nil
	}
}

// Admit decides one request of principal ("" for anonymous) of tenant,
// whose current limits are lim (from the tenancy snapshot; a change
// applies at once, keeping the buckets' tokens and the calls in flight).
//
// Admitted, it takes a token from the tenant's and the principal's
// buckets and an in-flight slot, and returns a Ticket to end with Done,
// and a nil error. Over a limit, it takes nothing and returns a
// [proto.CodeLimited] error whose Data is
// {"limit": "tenant_rate"|"principal_rate"|"in_flight", "retryAfterMs": N}:
// the limit whose wait is longest when several are exceeded, and N, at
// least 1, when this edge's bucket will have a token again (in_flight:
// [Config.InFlightRetryAfter]). Check the error as a *proto.Error, not
// through an error interface, which would be non-nil.
//
// Within limits it does not allocate, except the first time it sees a
// tenant or a principal.
func (l *Limiter) Admit(tenant string, lim tenancy.Limits, principal string) (Ticket, *proto.Error) {
	view := l.fleet.View()
	// The clock is read only for buckets (a third of the cost of an
	// Admit on some VMs), and outside the lock.
	var now time.Time
	if lim.Rate > 0 || lim.PrincipalRate > 0 {
		now = l.now()
	}
	for {
		ts := l.tenant(tenant)
		ts.mu.Lock()
		if ts.dead {
			ts.mu.Unlock()
			continue
		}
		if !now.IsZero() {
			// Admits that read the clock before the lock may get it in
			// another order: a bucket given an earlier time than its last
			// would move its clock back and count that interval's refill
			// twice.
			if now.Before(ts.now) {
				now = ts.now
			} else {
				ts.now = now
			}
		}
		if ts.lim != lim || ts.view != view {
			ts.apply(lim, view, now)
		}
		var (
			which string
			wait  time.Duration
		)
		if m := ts.share.MaxInFlight; m >= 0 && ts.calls.Load() >= int64(m) {
			which, wait = LimitInFlight, l.inFlightHint
		}
		var ps *principalState
		if ts.pburst > 0 {
			ps = ts.principal(l, principal, now)
			if d, ok := need(ps.bucket, now, ts.share.PrincipalRate); !ok && d > wait {
				which, wait = LimitPrincipalRate, d
			}
		}
		switch {
		case ts.bucket == nil:
		case which == "" && ts.bucket.AllowN(now, 1):
			// The last check: the token is taken only when nothing else
			// refuses.
		default:
			if d, ok := need(ts.bucket, now, ts.share.Rate); !ok && d > wait {
				which, wait = LimitTenantRate, d
			}
		}
		if which != "" {
			ts.mu.Unlock()
			return Ticket{}, limited(which, wait)
		}
		// The principal's bucket was seen to hold a token under ts.mu,
		// which every use of it holds: this cannot fail.
		if ps != nil {
			ps.bucket.AllowN(now, 1)
			ps.last = now
		}
		ts.calls.Add(1)
		ts.mu.Unlock()
		return Ticket{t: ts}, nil
	}
}

// need reports whether b holds a token at now, and if not, how long its
// rate r takes to refill one (at least a millisecond).
func need(b *rate.Limiter, now time.Time, r float64) (time.Duration, bool) {
	tok := b.TokensAt(now)
	if tok >= 1 {
		return 0, true
	}
	secs := (1 - tok) / r
	if secs >= maxRetryAfter.Seconds() {
		return maxRetryAfter, false
	}
	// floor+1 rather than ceil: the bucket's own float arithmetic may
	// find a hair less than a token at exactly the computed instant, and
	// a hint that is early is a wasted retry.
	return time.Duration(math.Floor(secs*1e3)+1) * time.Millisecond, false
}

// tenant returns the state of name, creating it.
func (l *Limiter) tenant(name string) *tenantState {
	l.mu.RLock()
	ts := l.tenants[name]
	l.mu.RUnlock()
	if ts != nil {
		return ts
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ts = l.tenants[name]; ts == nil {
		name = strings.Clone(name) // as for principals
		ts = &tenantState{name: name, hash: hashString(fnvOffset, name)}
		l.tenants[name] = ts
	}
	return ts
}

// apply sets the tenant's share for lim and view, keeping the tokens of
// buckets that stay limited. Called with ts.mu held.
func (ts *tenantState) apply(lim tenancy.Limits, view *View, now time.Time) {
	ts.lim, ts.view = lim, view
	ts.gen++
	ts.share = TenantShare(lim, view, ts.name)
	switch {
	case ts.share.Rate == 0:
		ts.bucket = nil
	case ts.bucket == nil:
		ts.bucket = rate.NewLimiter(rate.Limit(ts.share.Rate), ts.share.Burst)
	default:
		ts.bucket.SetLimitAt(now, rate.Limit(ts.share.Rate))
		ts.bucket.SetBurstAt(now, ts.share.Burst)
	}
	_, ts.pburst, _ = bucket(lim.PrincipalRate, lim.PrincipalBurst)
	if ts.pburst == 0 {
		// No principal rate: the buckets would be refilled to full by
		// the time one is set again, so they need not be kept.
		ts.principals = nil
	}
}

// principal returns the bucket of p, creating it full or bringing it to
// the current share. Called with ts.mu held.
func (ts *tenantState) principal(l *Limiter, p string, now time.Time) *principalState {
	ps := ts.principals[p]
	if ps == nil {
		if ts.principals == nil {
			ts.principals = map[string]*principalState{}
			ts.nextSweep, ts.lastSweep = 0, now
		}
		if len(ts.principals) >= ts.nextSweep || now.Sub(ts.lastSweep) >= sweepEvery {
			ts.sweep(l.maxPrincipals, now)
		}
		h := principalHash(ts.name, p)
		ps = &principalState{
			bucket: rate.NewLimiter(rate.Limit(ts.share.PrincipalRate), principalBurst(ts.pburst, ts.view, h)),
			hash:   h,
			gen:    ts.gen,
			last:   now,
		}
		// A copy: p may point into a buffer of the caller's (a decoded
		// token) that the table must not keep alive.
		ts.principals[strings.Clone(p)] = ps
		return ps
	}
	if ps.gen != ts.gen {
		ps.gen = ts.gen
		ps.bucket.SetLimitAt(now, rate.Limit(ts.share.PrincipalRate))
		ps.bucket.SetBurstAt(now, principalBurst(ts.pburst, ts.view, ps.hash))
	}
	return ps
}

// sweep drops the principals whose buckets are full (a new bucket would
// be the same), then, if maxP or more remain, the least recently seen
// down to 7/8 of maxP, and sets when to sweep next: when the table has
// doubled, so that sweeping is amortized over the insertions. Called
// with ts.mu held, before inserting one principal.
func (ts *tenantState) sweep(maxP int, now time.Time) {
	for p, ps := range ts.principals {
		if ps.bucket.TokensAt(now) >= float64(ps.bucket.Burst()) {
			delete(ts.principals, p)
		}
	}
	if len(ts.principals) >= maxP {
		keep := maxP * 7 / 8
		seen := make([]time.Time, 0, len(ts.principals))
		for _, ps := range ts.principals {
			seen = append(seen, ps.last)
		}
		slices.SortFunc(seen, func(a, b time.Time) int { return b.Compare(a) })
		cut := seen[keep] // entries seen at or before cut go
		for p, ps := range ts.principals {
			if !ps.last.After(cut) {
				delete(ts.principals, p)
			}
		}
	}
	ts.nextSweep = min(maxP, max(64, 2*len(ts.principals)))
	ts.lastSweep = now
}

// Sweep drops the idle state of every tenant: principals whose buckets
// are full, and tenants with no call in flight, a full bucket and no
// principal left. Admit sweeps a tenant's principals as their table
// grows, which bounds memory without Sweep; call it periodically (every
// minute, say) to return memory after a peak. It takes each tenant's
// lock in turn.
func (l *Limiter) Sweep() {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, ts := range l.tenants {
		ts.mu.Lock()
		if ts.principals != nil {
			ts.sweep(l.maxPrincipals, now)
		}
		if len(ts.principals) == 0 && ts.calls.Load() == 0 &&
			(ts.bucket == nil || ts.bucket.TokensAt(now) >= float64(ts.bucket.Burst())) {
			ts.dead = true
			delete(l.tenants, name)
		}
		ts.mu.Unlock()
	}
}

// InFlight returns the tenant's calls admitted by this Limiter and not
// yet Done, for metrics and health.
func (l *Limiter) InFlight(tenant string) int {
	l.mu.RLock()
	ts := l.tenants[tenant]
	l.mu.RUnlock()
	if ts == nil {
		return 0
	}
	return int(ts.calls.Load())
}

var limitedMsg = map[string]string{
	LimitTenantRate:    "tenant rate limit exceeded",
	LimitPrincipalRate: "principal rate limit exceeded",
	LimitInFlight:      "too many calls in flight for the tenant",
	LimitSessions:      "too many open sessions for the tenant",
}

// limited builds the CodeLimited error of which with retry hint wait.
func limited(which string, wait time.Duration) *proto.Error {
	ms := max(1, (wait+time.Millisecond-1)/time.Millisecond)
	d := make([]byte, 0, 64)
	d = append(d, `{"limit":"`...)
	d = append(d, which...)
	d = append(d, `","retryAfterMs":`...)
	d = strconv.AppendInt(d, int64(ms), 10)
	d = append(d, '}')
	return &proto.Error{Code: proto.CodeLimited, Msg: limitedMsg[which], Data: d}
}

// SessionsRefused is the [proto.CodeLimited] error of a session refused by
// the tenant's session cap ([LimitSessions]); its retry hint is wait.
func SessionsRefused(wait time.Duration) *proto.Error { return limited(LimitSessions, wait) }

// Refusal is the Data of a [proto.CodeLimited] error.
type Refusal struct {
	Limit        string `json:"limit"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

// RetryAfter is the hint as a duration.
func (r Refusal) RetryAfter() time.Duration { return time.Duration(r.RetryAfterMs) * time.Millisecond }

// Refused returns the Data of e if e is a CodeLimited error with valid
// Data, for the edge's HTTP Retry-After header.
func Refused(e *proto.Error) (Refusal, bool) {
	var r Refusal
	if e == nil || e.Code != proto.CodeLimited || json.Unmarshal(e.Data, &r) != nil || r.Limit == "" {
		return Refusal{}, false
	}
	return r, true
}
