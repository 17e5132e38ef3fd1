package bus

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Routers is the set of live routers as an edge sees it, from their
// heartbeats on switchyard.v1.evt.router.<router> (proto.RouterHeartbeat):
// a router is live from its first heartbeat until its Bye, or until
// proto.HeartbeatMisses of its intervals pass without one (timed by this
// process's clock on receipt). An edge sends each call a router must place
// to one live router by name ([Routers.Pick]), so that it knows which
// router holds it; OnGone tells it when a router went, to send the calls
// that router held elsewhere.
//
// While this process's own NATS connection is down no router is counted
// gone (their heartbeats cannot arrive); on reconnect each gets a fresh
// deadline.
//
// Safe for concurrent use. Call Start once, then Run.
type Routers struct {
	nc *nats.Conn
	// OnGone, if set, is called (on the subscription's, Run's or a timer's
	// goroutine) with each router that went: said is true when it said so
	// (its Bye, after placing every call it had), false when it stopped
	// heartbeating or could not be reached and did not come back within
	// SuspectGrace (it may be late, not dead, and still place what it
	// holds). Set it before Start.
	OnGone func(router string, said bool)

	mu       sync.Mutex
	live     map[string]routerState // guarded by mu
	suspect  map[string]uint64      // guarded by mu: suspected, not back yet: the suspicion's number (Suspect)
	suspects uint64                 // guarded by mu: numbers the suspicions
	pick     atomic.Pointer[[]string]
	rr       atomic.Uint64
	sub      *nats.Subscription
}

// NewRouters returns an empty set on nc.
func NewRouters(nc *nats.Conn) *Routers {
	r := &Routers{nc: nc, live: map[string]routerState{}, suspect: map[string]uint64{}}
	r.pick.Store(&[]string{})
	return r
}

// Start subscribes to the routers' heartbeats.
func (r *Routers) Start() error {
	sub, err := r.nc.Subscribe(proto.SubjEvtRouterAll, Guard(proto.SubjEvtRouterAll, r.onBeat))
	if err != nil {
		return err
	}
	r.sub = sub
	return nil
}

// Run expires routers that missed their heartbeats, every 100 ms, until
// ctx ends.
func (r *Routers) Run(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	reconnected := r.nc.StatusChanged(nats.CONNECTED)
	defer r.nc.RemoveStatusListener(reconnected)
	for {
		select {
		case <-ctx.Done():
			if r.sub != nil {
				_ = r.sub.Unsubscribe()
			}
			return nil
		case <-reconnected:
			r.refresh()
		case now := <-t.C:
			if r.nc.IsConnected() {
				r.expire(now)
			}
		}
	}
}

// Pick returns the next live router in turn, or "" when none is known
// (the caller then sends on the routers' queue subject).
func (r *Routers) Pick() string {
	p := *r.pick.Load()
	if len(p) == 0 {
		return ""
	}
	return p[r.rr.Add(1)%uint64(len(p))]
}

// Live reports whether router is counted live.
func (r *Routers) Live(router string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.live[router]
	return ok
}

// routerState is a live router's deadline (its next heartbeat due by
// then) and whether it is draining (live, but picked no more).
type routerState struct {
	deadline  time.Time
	draining  bool
	lastClear time.Time // when the last heartbeat without Backlog came
}

// ClearAfter reports whether router is live and sent, after t, a
// heartbeat saying it had no call queued or in hand (no Backlog). NATS
// keeps each connection's messages in order, and a router whose
// connection broke sends what it buffered meanwhile before any later
// heartbeat: so every call it had received by then has been placed (its
// forward gone out) or answered, short of a stalled route, which NATS
// nodes give up within seconds.
func (r *Routers) ClearAfter(router string, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.live[router]
	return ok && st.lastClear.After(t)
}

// SuspectGrace is how long a router suspected of being gone (Suspect) has
// to heartbeat again before it counts as gone: a router whose NATS node
// went is back on another within it (its heartbeats come every 500 ms).
const SuspectGrace = 1200 * time.Millisecond

// Suspect stops picking router now (a call sent to it found no responder:
// it has no subscription on the bus at the moment). That call reached
// nobody; but a router whose connection broke (its NATS node restarting)
// holds the calls it took before, and sends what it placed meanwhile when
// it reconnects, so the others it holds are not given up yet: if it does
// not heartbeat again within SuspectGrace, it counts as gone without
// having said so (OnGone, said false), unless its Bye comes first (said
// true). A heartbeat brings it back. An unknown router is ignored.
func (r *Routers) Suspect(router string) {
	r.mu.Lock()
	_, known := r.live[router]
	var n uint64
	if known {
		delete(r.live, router)
		r.suspects++
		n = r.suspects
		r.suspect[router] = n
		r.publish()
	}
	r.mu.Unlock()
	if !known {
		return
	}
	time.AfterFunc(SuspectGrace, func() {
		// Only this suspicion's own end: a router back and suspected
		// again has a grace of its own.
		r.mu.Lock()
		still := r.suspect[router] == n
		if still {
			delete(r.suspect, router)
		}
		r.mu.Unlock()
		if still && r.OnGone != nil {
			r.OnGone(router, false)
		}
	})
}

func (r *Routers) onBeat(m *nats.Msg) {
	var hb proto.RouterHeartbeat
	if proto.Unmarshal(m.Data, &hb) != nil || !proto.ValidToken(hb.Router) {
		return
	}
	if hb.Bye {
		r.drop(hb.Router, true)
		return
	}
	iv := time.Duration(hb.IntervalMs) * time.Millisecond
	if iv <= 0 || iv > time.Minute {
		iv = time.Second
	}
	now := time.Now()
	r.mu.Lock()
	delete(r.suspect, hb.Router) // back
	old, known := r.live[hb.Router]
	clear := old.lastClear
	if !hb.Backlog {
		clear = now
	}
	r.live[hb.Router] = routerState{deadline: now.Add(iv * proto.HeartbeatMisses), draining: hb.Draining, lastClear: clear}
	if !known || old.draining != hb.Draining {
		r.publish()
	}
	r.mu.Unlock()
}

func (r *Routers) drop(router string, said bool) {
	r.mu.Lock()
	_, known := r.live[router]
	if r.suspect[router] != 0 {
		known = true // its Bye during the grace: it went (Suspect's timer does nothing)
		delete(r.suspect, router)
	}
	delete(r.live, router)
	if known {
		r.publish()
	}
	r.mu.Unlock()
	if known && r.OnGone != nil {
		r.OnGone(router, said)
	}
}

func (r *Routers) expire(now time.Time) {
	var gone []string
	r.mu.Lock()
	for id, st := range r.live {
		if now.After(st.deadline) {
			gone = append(gone, id)
		}
	}
	r.mu.Unlock()
	for _, id := range gone {
		r.drop(id, false)
	}
}

// refresh gives every router a fresh deadline (this process was away).
func (r *Routers) refresh() {
	r.mu.Lock()
	d := time.Now().Add(time.Second * proto.HeartbeatMisses)
	for id, st := range r.live {
		st.deadline = d
		r.live[id] = st
	}
	r.mu.Unlock()
}

// publish rebuilds the pick list. Call with r.mu held.
func (r *Routers) publish() {
	p := make([]string, 0, len(r.live))
	for id, st := range r.live {
		if !st.draining {
			p = append(p, id)
		}
	}
	slices.Sort(p)
	r.pick.Store(&p)
}
