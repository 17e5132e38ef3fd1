package limit

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// clock is a fake clock for the token buckets: time moves only when a
// test says so.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLimiter(t *testing.T, cfg Config) (*Limiter, *clock) {
	t.Helper()
	c := newClock()
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

// admitN admits up to n requests and returns the tickets of the admitted
// ones and the first refusal (nil if all were admitted).
func admitN(l *Limiter, n int, tenant string, lim tenancy.Limits, principal string) ([]Ticket, *proto.Error) {
	var ts []Ticket
	for range n {
		tk, err := l.Admit(tenant, lim, principal)
		if err != nil {
			return ts, err
		}
		ts = append(ts, tk)
	}
	return ts, nil
}

// wantRefusal checks that err is a CodeLimited error for limit with a
// retry hint of retryMs (to the millisecond above, for float rounding).
func wantRefusal(t *testing.T, err *proto.Error, limit string, retryMs int64) Refusal {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted, want a %s refusal", limit)
	}
	if err.Code != proto.CodeLimited {
		t.Fatalf("code %d, want %d", err.Code, proto.CodeLimited)
	}
	var d struct {
		Limit        string `json:"limit"`
		RetryAfterMs *int64 `json:"retryAfterMs"`
	}
	if e := json.Unmarshal(err.Data, &d); e != nil {
		t.Fatalf("data %q is not JSON: %v", err.Data, e)
	}
	if d.Limit != limit || d.RetryAfterMs == nil {
		t.Fatalf("data %s, want limit %q and retryAfterMs", err.Data, limit)
	}
	if got := *d.RetryAfterMs; got < retryMs || got > retryMs+1 {
		t.Fatalf("retryAfterMs %d, want %d", got, retryMs)
	}
	r, ok := Refused(err)
	if !ok || r.Limit != limit || r.RetryAfter() != time.Duration(*d.RetryAfterMs)*time.Millisecond {
		t.Fatalf("Refused = %+v, %v", r, ok)
	}
	return r
}

func TestLimitTenantRate(t *testing.T) {
	l, c := newLimiter(t, Config{})
	lim := tenancy.Limits{Rate: 10, Burst: 5}
	ts, err := admitN(l, 6, "acme", lim, "alice")
	if len(ts) != 5 {
		t.Fatalf("admitted %d of a burst of 5", len(ts))
	}
	wantRefusal(t, err, LimitTenantRate, 100)
	// Other principals share the tenant's bucket.
	_, err = l.Admit("acme", lim, "bob")
	wantRefusal(t, err, LimitTenantRate, 100)
	// Another tenant has its own.
	if _, err := l.Admit("other", lim, "alice"); err != nil {
		t.Fatalf("other tenant refused: %v", err)
	}
	c.Advance(40 * time.Millisecond)
	_, err = l.Admit("acme", lim, "alice")
	r := wantRefusal(t, err, LimitTenantRate, 60)
	c.Advance(r.RetryAfter())
	if _, err := l.Admit("acme", lim, "alice"); err != nil {
		t.Fatalf("refused after the %v hinted: %v", r.RetryAfter(), err)
	}
	_, err = l.Admit("acme", lim, "alice")
	wantRefusal(t, err, LimitTenantRate, 100)
	c.Advance(time.Hour)
	ts, _ = admitN(l, 100, "acme", lim, "alice")
	if len(ts) != 5 {
		t.Fatalf("after an hour admitted %d, want the burst of 5", len(ts))
	}
}

func TestLimitBurstDefault(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	// burst 0 with a rate: one second's worth, ceil(2.5) = 3.
	ts, err := admitN(l, 10, "acme", tenancy.Limits{Rate: 2.5}, "")
	if len(ts) != 3 {
		t.Fatalf("admitted %d, want 3", len(ts))
	}
	wantRefusal(t, err, LimitTenantRate, 400)
	// A rate below 1/s still admits one.
	ts, _ = admitN(l, 10, "slow", tenancy.Limits{Rate: 0.1}, "")
	if len(ts) != 1 {
		t.Fatalf("admitted %d, want 1", len(ts))
	}
}

func TestLimitUnlimited(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	for _, lim := range []tenancy.Limits{{}, {Burst: 1, PrincipalBurst: 1}} {
		ts, err := admitN(l, 1000, "acme", lim, "alice")
		if err != nil || len(ts) != 1000 {
			t.Fatalf("%+v: admitted %d, then %v", lim, len(ts), err)
		}
	}
	if n := l.principalCount("acme"); n != 0 {
		t.Fatalf("%d principal buckets kept without a principal rate", n)
	}
	if n := l.InFlight("acme"); n != 2000 {
		t.Fatalf("in flight %d, want 2000 (counted even when unlimited)", n)
	}
}

func TestLimitPrincipalRate(t *testing.T) {
	l, c := newLimiter(t, Config{})
	lim := tenancy.Limits{PrincipalRate: 1, PrincipalBurst: 2}
	for _, p := range []string{"alice", "bob", ""} {
		ts, err := admitN(l, 3, "acme", lim, p)
		if len(ts) != 2 {
			t.Fatalf("principal %q: admitted %d of a burst of 2", p, len(ts))
		}
		wantRefusal(t, err, LimitPrincipalRate, 1000)
	}
	// Anonymous clients share one bucket per tenant, not across tenants.
	if _, err := l.Admit("other", lim, ""); err != nil {
		t.Fatalf("anonymous of another tenant refused: %v", err)
	}
	c.Advance(500 * time.Millisecond)
	_, err := l.Admit("acme", lim, "alice")
	wantRefusal(t, err, LimitPrincipalRate, 500)
}

func TestLimitRefusalTakesNothing(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	lim := tenancy.Limits{Rate: 1, Burst: 3, PrincipalRate: 1, PrincipalBurst: 1, MaxInFlight: 100}
	if _, err := l.Admit("acme", lim, "alice"); err != nil {
		t.Fatal(err)
	}
	// alice's refusals must not spend the tenant's tokens or slots.
	for range 5 {
		_, err := l.Admit("acme", lim, "alice")
		wantRefusal(t, err, LimitPrincipalRate, 1000)
	}
	for _, p := range []string{"bob", "carol"} {
		if _, err := l.Admit("acme", lim, p); err != nil {
			t.Fatalf("%s refused: %v", p, err)
		}
	}
	// The tenant's bucket is empty now: dave's own bucket is untouched.
	_, err := l.Admit("acme", lim, "dave")
	wantRefusal(t, err, LimitTenantRate, 1000)
	if _, err := l.Admit("acme", tenancy.Limits{PrincipalRate: 1, PrincipalBurst: 1}, "dave"); err != nil {
		t.Fatalf("dave's bucket was spent by a refusal: %v", err)
	}
	if n := l.InFlight("acme"); n != 4 {
		t.Fatalf("in flight %d, want the 4 admitted", n)
	}
}

func TestLimitInFlight(t *testing.T) {
	l, _ := newLimiter(t, Config{InFlightRetryAfter: 250 * time.Millisecond})
	lim := tenancy.Limits{MaxInFlight: 2}
	ts, err := admitN(l, 3, "acme", lim, "alice")
	if len(ts) != 2 {
		t.Fatalf("admitted %d, want 2", len(ts))
	}
	wantRefusal(t, err, LimitInFlight, 250)
	ts[0].Done()
	ts[0].Done() // a second Done of the same ticket counts nothing
	if n := l.InFlight("acme"); n != 1 {
		t.Fatalf("in flight %d after one Done, want 1", n)
	}
	tk, err := l.Admit("acme", lim, "bob")
	if err != nil {
		t.Fatalf("refused after a Done: %v", err)
	}
	_, err = l.Admit("acme", lim, "bob")
	wantRefusal(t, err, LimitInFlight, 250)
	tk.Done()
	ts[1].Done()
	if n := l.InFlight("acme"); n != 0 {
		t.Fatalf("in flight %d, want 0", n)
	}
	var zero Ticket
	zero.Done()
}

func TestLimitLongestWaitNamed(t *testing.T) {
	l, _ := newLimiter(t, Config{})
	lim := tenancy.Limits{Rate: 1, Burst: 1, MaxInFlight: 1}
	if _, err := l.Admit("acme", lim, ""); err != nil {
		t.Fatal(err)
	}
	// Both exceeded: the tenant rate's 1s beats the in-flight hint.
	_, err := l.Admit("acme", lim, "")
	wantRefusal(t, err, LimitTenantRate, 1000)
}

func TestLimitChange(t *testing.T) {
	l, c := newLimiter(t, Config{})
	lim := tenancy.Limits{MaxInFlight: 5}
	held, _ := admitN(l, 3, "acme", lim, "")
	if len(held) != 3 {
		t.Fatal("setup")
	}
	// A lower limit counts the calls already running.
	lim.MaxInFlight = 4
	more, err := admitN(l, 5, "acme", lim, "")
	if len(more) != 1 {
		t.Fatalf("at max 4 with 3 running admitted %d, want 1", len(more))
	}
	wantRefusal(t, err, LimitInFlight, DefaultInFlightRetryAfter.Milliseconds())
	// Unlimited, then limited again: the count survives both.
	if _, err := l.Admit("acme", tenancy.Limits{}, ""); err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit("acme", tenancy.Limits{MaxInFlight: 5}, "")
	wantRefusal(t, err, LimitInFlight, DefaultInFlightRetryAfter.Milliseconds())

	// A rate change keeps the tokens: a bigger burst is not a refill.
	rl := tenancy.Limits{Rate: 1, Burst: 5}
	if ts, _ := admitN(l, 5, "rated", rl, ""); len(ts) != 5 {
		t.Fatal("setup")
	}
	rl.Burst = 10
	_, err = l.Admit("rated", rl, "")
	wantRefusal(t, err, LimitTenantRate, 1000)
	rl.Rate = 4
	_, err = l.Admit("rated", rl, "")
	r := wantRefusal(t, err, LimitTenantRate, 250)
	c.Advance(r.RetryAfter())
	if _, err := l.Admit("rated", rl, ""); err != nil {
		t.Fatalf("refused at the new rate: %v", err)
	}
	// The principal buckets follow too.
	pl := tenancy.Limits{PrincipalRate: 1, PrincipalBurst: 1}
	if _, err := l.Admit("p", pl, "alice"); err != nil {
		t.Fatal(err)
	}
	pl.PrincipalRate = 10
	_, err = l.Admit("p", pl, "alice")
	wantRefusal(t, err, LimitPrincipalRate, 100)
}

func TestLimitFleetShare(t *testing.T) {
	// Three edges, this one ranked second: a third of the rate.
	view := NewView("edge-b", []string{"edge-a", "edge-c"})
	if view.N() != 3 || view.Rank != 1 {
		t.Fatalf("view %+v", view)
	}
	l, c := newLimiter(t, Config{Fleet: Fixed{V: view}})
	lim := tenancy.Limits{Rate: 10, Burst: 30}
	ts, err := admitN(l, 100, "acme", lim, "")
	if len(ts) != 10 {
		t.Fatalf("admitted %d, want a third of the burst of 30", len(ts))
	}
	r := wantRefusal(t, err, LimitTenantRate, 300)
	// At the hint, a retry succeeds.
	c.Advance(r.RetryAfter())
	if _, err := l.Admit("acme", lim, ""); err != nil {
		t.Fatalf("refused after the %v hinted: %v", r.RetryAfter(), err)
	}
}

func TestLimitShareSums(t *testing.T) {
	tenants := []string{"acme", "globex", "initech", "umbrella", "x"}
	for n := 1; n <= 7; n++ {
		var ids []string
		for i := range n {
			ids = append(ids, string(rune('a'+i)))
		}
		for _, total := range []int{1, 2, 3, 5, 7, 10, 64, 1001} {
			for _, tenant := range tenants {
				var flight, burst, pburst int
				var rate float64
				for r := range n {
					v := NewView(ids[r], ids)
					lim := tenancy.Limits{Rate: 9, Burst: total, PrincipalRate: 1, PrincipalBurst: total, MaxInFlight: total}
					s := TenantShare(lim, v, tenant)
					if s.MaxInFlight != total/n && s.MaxInFlight != total/n+1 {
						t.Fatalf("n=%d M=%d rank %d: in-flight share %d", n, total, r, s.MaxInFlight)
					}
					flight += s.MaxInFlight
					burst += s.Burst
					rate += s.Rate
					pburst += PrincipalBurst(lim, v, tenant, "alice")
				}
				if flight != total {
					t.Fatalf("n=%d M=%d %s: in-flight shares sum to %d", n, total, tenant, flight)
				}
				if want := max(total, n); burst != want || pburst != want {
					t.Fatalf("n=%d B=%d %s: burst shares sum to %d and %d, want %d", n, total, tenant, burst, pburst, want)
				}
				if rate < 9-1e-9 || rate > 9+1e-9 {
					t.Fatalf("n=%d: rates sum to %v", n, rate)
				}
			}
		}
	}
	// The extra unit does not always land on the same rank.
	ids := []string{"a", "b", "c"}
	got := map[int]bool{}
	for _, tenant := range tenants {
		for r := range 3 {
			if TenantShare(tenancy.Limits{MaxInFlight: 4}, NewView(ids[r], ids), tenant).MaxInFlight == 2 {
				got[r] = true
			}
		}
	}
	if len(got) < 2 {
		t.Fatalf("the extra in-flight slot always lands on ranks %v", got)
	}
	// An edge whose in-flight share is 0 refuses.
	var zeroRank *View
	for r := range 3 {
		if w := NewView(ids[r], ids); TenantShare(tenancy.Limits{MaxInFlight: 1}, w, "acme").MaxInFlight == 0 {
			zeroRank = w
		}
	}
	if zeroRank == nil {
		t.Fatal("no edge with a zero share of 1 among 3")
	}
	l, _ := newLimiter(t, Config{Fleet: Fixed{V: zeroRank}})
	_, err := l.Admit("acme", tenancy.Limits{MaxInFlight: 1}, "")
	wantRefusal(t, err, LimitInFlight, DefaultInFlightRetryAfter.Milliseconds())
}

func TestLimitPrincipalEviction(t *testing.T) {
	l, c := newLimiter(t, Config{MaxPrincipals: 1000})
	lim := tenancy.Limits{PrincipalRate: 1, PrincipalBurst: 1}
	if _, err := l.Admit("acme", lim, "alice"); err != nil {
		t.Fatal(err)
	}
	// Busy principals are kept: alice stays refused however many others
	// come, below the cap.
	for i := range 900 {
		if _, err := l.Admit("acme", lim, "p"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Admit("acme", lim, "alice")
	wantRefusal(t, err, LimitPrincipalRate, 1000)
	if n := l.principalCount("acme"); n != 901 {
		t.Fatalf("%d principals kept, want 901", n)
	}
	// Once refilled they are idle and go as new ones arrive.
	c.Advance(time.Second)
	for i := range 2000 {
		if _, err := l.Admit("acme", lim, "q"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if n := l.principalCount("acme"); n > 1000 {
			t.Fatalf("%d principals kept, cap 1000", n)
		}
		if i%100 == 99 {
			c.Advance(time.Second)
		}
	}
	if n := l.principalCount("acme"); n > 256 {
		t.Fatalf("%d principals kept with at most 100 busy", n)
	}
	// Past the cap with everyone busy, the least recently seen go.
	for i := range 5000 {
		if _, err := l.Admit("acme", lim, "r"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if n := l.principalCount("acme"); n > 1000 {
			t.Fatalf("%d principals kept, cap 1000", n)
		}
		if i%10 == 9 {
			c.Advance(time.Millisecond)
		}
	}
	_, err = l.Admit("acme", lim, "r4999")
	wantRefusal(t, err, LimitPrincipalRate, 999)
}

func TestLimitSweep(t *testing.T) {
	l, c := newLimiter(t, Config{})
	lim := tenancy.Limits{Rate: 1, Burst: 1, PrincipalRate: 1, PrincipalBurst: 1}
	tk, err := l.Admit("busy", tenancy.Limits{MaxInFlight: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	itk, err := l.Admit("idle", lim, "alice")
	if err != nil {
		t.Fatal(err)
	}
	itk.Done()
	l.Sweep()
	if l.tenantCount() != 2 {
		t.Fatalf("swept a tenant with a call in flight or an empty bucket: %d left", l.tenantCount())
	}
	c.Advance(time.Second)
	l.Sweep()
	if l.tenantCount() != 1 || l.InFlight("busy") != 1 {
		t.Fatalf("after refill: %d tenants, busy in flight %d", l.tenantCount(), l.InFlight("busy"))
	}
	// A swept tenant comes back fresh.
	if _, err := l.Admit("idle", lim, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit("busy", tenancy.Limits{MaxInFlight: 1}, "")
	wantRefusal(t, err, LimitInFlight, DefaultInFlightRetryAfter.Milliseconds())
	tk.Done()
	l.Sweep()
	if l.InFlight("busy") != 0 || l.tenantCount() != 1 {
		t.Fatalf("busy not swept after Done: %d tenants", l.tenantCount())
	}
}

// TestLimitConcurrent runs Admit, Done and Sweep from many goroutines
// (for the race detector) and checks that the in-flight cap is never
// exceeded.
func TestLimitConcurrent(t *testing.T) {
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim := tenancy.Limits{MaxInFlight: 3, PrincipalRate: 1e9, PrincipalBurst: 1e6}
	var running, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tk, err := l.Admit("acme", lim, "p"+strconv.Itoa(g*7+i%5))
				if err != nil {
					continue
				}
				admitted.Add(1)
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				running.Add(-1)
				tk.Done()
				if i%500 == 0 {
					l.Sweep()
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 {
		t.Fatalf("%d calls ran at once under a cap of 3", p)
	}
	if admitted.Load() == 0 || l.InFlight("acme") != 0 {
		t.Fatalf("admitted %d, in flight at the end %d", admitted.Load(), l.InFlight("acme"))
	}
}

func TestLimitConfig(t *testing.T) {
	if _, err := New(Config{MaxPrincipals: -1}); err == nil {
		t.Fatal("negative MaxPrincipals accepted")
	}
	if _, err := New(Config{InFlightRetryAfter: -1}); err == nil {
		t.Fatal("negative InFlightRetryAfter accepted")
	}
	if _, ok := Refused(proto.ErrOverloaded); ok {
		t.Fatal("Refused took another code")
	}
	if _, ok := Refused(&proto.Error{Code: proto.CodeLimited, Data: []byte("{")}); ok {
		t.Fatal("Refused took bad data")
	}
	var nilFleet *Fleet
	if nilFleet.View().N() != 1 {
		t.Fatal("a nil Fleet is not alone")
	}
}

func (l *Limiter) principalCount(tenant string) int {
	l.mu.RLock()
	ts := l.tenants[tenant]
	l.mu.RUnlock()
	if ts == nil {
		return 0
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.principals)
}

func (l *Limiter) tenantCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.tenants)
}

// TestLimitClockOrder: admits whose clock reads reach the buckets out of
// order (read before the tenant's lock) must not count a refill twice.
func TestLimitClockOrder(t *testing.T) {
	base := newClock().Now()
	var calls atomic.Int64
	// Alternates between base+10ms and base+5ms, as two goroutines that
	// read the clock in one order and took the lock in the other would.
	now := func() time.Time {
		if calls.Add(1)%2 == 1 {
			return base.Add(10 * time.Millisecond)
		}
		return base.Add(5 * time.Millisecond)
	}
	l, err := New(Config{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	lim := tenancy.Limits{Rate: 1000, Burst: 100, PrincipalRate: 1000, PrincipalBurst: 100}
	ts, _ := admitN(l, 1000, "acme", lim, "alice")
	// A full bucket of 100 at base+5ms at the earliest, plus at most 10ms
	// of refill at 1000/s.
	if len(ts) > 110 {
		t.Fatalf("admitted %d, at most 110 fit by base+10ms", len(ts))
	}
}

// TestLimitAdmitAllocs: within limits, an admission of a known tenant and
// principal allocates nothing; a refusal allocates its error and data.
func TestLimitAdmitAllocs(t *testing.T) {
	l, _ := newLimiter(t, Config{Fleet: Fixed{V: NewView("b", []string{"a", "c"})}})
	lim := tenancy.Limits{Rate: 1, Burst: 1 << 30, PrincipalRate: 1, PrincipalBurst: 1 << 30, MaxInFlight: 1 << 20}
	tk, _ := l.Admit("acme", lim, "alice")
	tk.Done()
	if n := testing.AllocsPerRun(1000, func() {
		tk, err := l.Admit("acme", lim, "alice")
		if err != nil {
			t.Fatal(err)
		}
		tk.Done()
	}); n != 0 {
		t.Fatalf("%v allocations per admission", n)
	}
	full := tenancy.Limits{MaxInFlight: 3} // one on each of the 3 edges
	held, err := l.Admit("full", full, "")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Done()
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := l.Admit("full", full, ""); err == nil {
			t.Fatal("admitted over the cap")
		}
	}); n > 2 {
		t.Fatalf("%v allocations per refusal", n)
	}
}

// TestSessionShare: the edges' shares of a tenant's max_sessions sum to
// it, for every fleet size; none without a cap.
func TestSessionShare(t *testing.T) {
	if got := SessionShare(tenancy.Limits{}, NewView("a", nil), "acme"); got != -1 {
		t.Fatalf("no cap: %d, want -1", got)
	}
	for _, total := range []int{1, 2, 7, 100} {
		for n := 1; n <= 5; n++ {
			ids := []string{"a", "b", "c", "d", "e"}[:n]
			sum := 0
			for _, id := range ids {
				s := SessionShare(tenancy.Limits{MaxSessions: total}, NewView(id, ids), "acme")
				if s < 0 || s > total/n+1 {
					t.Fatalf("total %d, %d edges: share %d", total, n, s)
				}
				sum += s
			}
			if sum != total {
				t.Fatalf("total %d, %d edges: shares sum to %d", total, n, sum)
			}
		}
	}
}
