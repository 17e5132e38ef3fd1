package edge

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/bus"
)

// clientSession is a stateful (2025-era) client session as the edge tracks
// it, beside the SDK's own table: the fast path serves its tools/call and
// tools/list without the SDK, so the edge, not the SDK, keeps the idle
// timer (every POST of the session, whichever path serves it, holds it
// open) and the ids of the calls it serves (for notifications/cancelled
// and duplicate ids).
type clientSession struct {
	id       string // the SDK's session id, or the edge's for a legacy SSE session
	ss       *mcp.ServerSession
	view     string      // the view's key (tenant/name)
	tenant   string      // the view's tenant, for the per-tenant cap
	owner    string      // the identity's user that created it ("" anonymous)
	protocol string      // negotiated by initialize
	caps     []byte      // the client's capabilities from initialize, as JSON
	ready    atomic.Bool // open to the fast path: initialized (streamable HTTP) or notifications/initialized arrived (legacy SSE)

	mu       sync.Mutex
	refs     int         // guarded by mu: POSTs in progress
	timer    *time.Timer // guarded by mu: nil without a timeout or once closed
	timeout  time.Duration
	inflight map[string]*fastEntry // guarded by mu: fast-path calls by idKey
	viaSDK   map[string]int        // guarded by mu: requests the SDK serves, by idKey
	// cancelledSDK holds the idKeys of requests the SDK serves that the
	// client cancelled (notifications/cancelled): their responses are
	// not sent (sdkCancelWriter).
	cancelledSDK map[string]bool         // guarded by mu
	relayed      map[string]string       // guarded by mu: relay id -> where the client's answer goes
	subs         map[string]struct{}     // guarded by mu: the resource URIs the client is subscribed to
	asks         sync.WaitGroup          // session-level relayed requests in flight
	aliased      aliases                 // ids the SDK could not echo, in flight
	logLevel     atomic.Pointer[string]  // the level of the client's last logging/setLevel
	gone         func(cs *clientSession) // told when the session ends

	// origin is the edge that created the session ("": this one): its
	// requests go out under that edge's name (proto.SessionRecord.Origin).
	origin string
	// stored is when this edge last wrote the session's record (Unix ms;
	// 0: never, e.g. a legacy SSE session, which has none).
	stored atomic.Int64
	// dropOnly marks an end that is this edge's copy only (another edge
	// ended the session, or serves it now, or this edge evicted it from
	// memory): no record deleted, no session_closed published.
	dropOnly atomic.Bool
	// ended marks a session ended for all (a DELETE here, or another
	// edge's session_closed): nothing serves it from then on.
	ended atomic.Bool
	// last is when a request of the session last ended here (Unix ms);
	// streams counts its GET streams open here. The evictor reads them.
	last    atomic.Int64
	streams atomic.Int32
}

// quiet reports whether nothing of cs is in progress on this edge: no
// request, no GET stream, no call, no request relayed to the client.
func (cs *clientSession) quiet() bool {
	if cs.streams.Load() > 0 {
		return false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.refs == 0 && len(cs.inflight) == 0 && len(cs.viaSDK) == 0 && len(cs.relayed) == 0
}

// setSub records that the client subscribed to uri (on) or unsubscribed
// from it.
func (cs *clientSession) setSub(uri string, on bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if on {
		if cs.subs == nil {
			cs.subs = map[string]struct{}{}
		}
		cs.subs[uri] = struct{}{}
	} else {
		delete(cs.subs, uri)
	}
}

// subURIs returns the URIs the client is subscribed to, sorted.
func (cs *clientSession) subURIs() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]string, 0, len(cs.subs))
	for u := range cs.subs {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// sessionEdge is the edge name the session's requests carry: its origin,
// or self for a session this edge created.
func (cs *clientSession) sessionEdge(self string) string {
	if cs.origin != "" {
		return cs.origin
	}
	return self
}

// sessionTable holds the edge's stateful client sessions by session id,
// and by SDK session. Safe for concurrent use.
type sessionTable struct {
	mu       sync.RWMutex
	m        map[string]*clientSession             // guarded by mu
	bySDK    map[*mcp.ServerSession]*clientSession // guarded by mu
	pending  int                                   // guarded by mu: sessions being opened (reserve)
	byTenant map[string]int                        // guarded by mu: sessions open and being opened, by tenant
	slots    map[string]*sessionSlot               // guarded by mu: reservations by token
}

// sessionSlot is a reservation of [sessionTable.reserve]: the opening
// session's place under the caps until it is added (the place passes to
// the session) or released.
type sessionSlot struct {
	tenant string
	done   bool // guarded by the table's mu: added or released
}

// hdrSessionSlot carries a reservation's token from the initialize POST to
// the SDK's initialize handler (RequestExtra.Header), so that the session
// takes over its reservation's place. The edge deletes it from every
// request a client sends.
const hdrSessionSlot = "Switchyard-Session-Slot"

// The cap a reservation ran into.
const (
	capNone = iota
	capEdge
	capTenant
)

// reserve counts a session of tenant being opened against the caps (the
// edge's maxAll, the tenant's maxTenant; negative: none) until the
// returned func is called, or until [sessionTable.add] is given the
// returned token (the session then takes its place); it reports the cap
// that refused it instead (then nothing is counted).
func (t *sessionTable) reserve(tenant string, maxAll, maxTenant int) (release func(), token string, which int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if maxAll >= 0 && len(t.m)+t.pending >= maxAll {
		return nil, "", capEdge
	}
	if maxTenant >= 0 && t.byTenant[tenant] >= maxTenant {
		return nil, "", capTenant
	}
	t.pending++
	t.countTenant(tenant, 1)
	token = bus.RandomToken(15)
	slot := &sessionSlot{tenant: tenant}
	if t.slots == nil {
		t.slots = map[string]*sessionSlot{}
	}
	t.slots[token] = slot
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.slots, token)
		if !slot.done {
			slot.done = true
			t.pending--
			t.countTenant(tenant, -1)
		}
	}, token, capNone
}

// countTenant adds d to tenant's count. Call with t.mu held.
func (t *sessionTable) countTenant(tenant string, d int) {
	if t.byTenant == nil {
		t.byTenant = map[string]int{}
	}
	if n := t.byTenant[tenant] + d; n > 0 {
		t.byTenant[tenant] = n
	} else {
		delete(t.byTenant, tenant)
	}
}

// count returns the sessions open on the edge.
func (t *sessionTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// all returns the sessions held now.
func (t *sessionTable) all() []*clientSession {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]*clientSession, 0, len(t.m))
	for _, cs := range t.m {
		out = append(out, cs)
	}
	return out
}

// of returns the tracked session of ss, or nil.
func (t *sessionTable) of(ss *mcp.ServerSession) *clientSession {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.bySDK[ss]
}

func (t *sessionTable) get(id string) *clientSession {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[id]
}

// add tracks ss under id from its initialize on; the entry goes when the
// session ends, and gone is called then. A timeout > 0 calls idle after
// that long without a POST (which closes the session, or this edge's copy
// of it). slot is the token of the reservation ([sessionTable.reserve])
// whose place the session takes ("" or unknown: it counts on its own);
// origin the edge that created the session ("": this one).
func (t *sessionTable) add(ss *mcp.ServerSession, id, view, tenant, owner, protocol, origin, slot string, timeout time.Duration,
	idle func(cs *clientSession), gone func(cs *clientSession)) *clientSession {
	cs := &clientSession{id: id, ss: ss, view: view, tenant: tenant, owner: owner, protocol: protocol, origin: origin, timeout: timeout,
		inflight: map[string]*fastEntry{}, relayed: map[string]string{}}
	if timeout > 0 {
		cs.timer = time.AfterFunc(timeout, func() { idle(cs) })
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*clientSession{}
	}
	if old := t.m[id]; old != nil {
		t.countTenant(old.tenant, -1)
		delete(t.bySDK, old.ss)
	}
	t.m[id] = cs
	if sl := t.slots[slot]; sl != nil && !sl.done && sl.tenant == tenant {
		sl.done = true // its place under the caps is the session's now
		t.pending--
	} else {
		t.countTenant(tenant, 1)
	}
	if t.bySDK == nil {
		t.bySDK = map[*mcp.ServerSession]*clientSession{}
	}
	t.bySDK[ss] = cs
	t.mu.Unlock()
	cs.gone = gone
	cs.last.Store(time.Now().UnixMilli())
	if ss.ID() == "" {
		// A legacy SSE session: its end is seen by waiting for it. A
		// streamable one's is told by its transport (sessionEvents), which
		// spares a goroutine per idle session.
		go func() {
			_ = ss.Wait()
			t.end(cs)
		}()
	}
	return cs
}

// ended is called when the streamable session id has ended (its
// transport closed): its entry goes, its calls are cancelled, and the
// workers are told.
func (t *sessionTable) ended(id string) {
	if cs := t.get(id); cs != nil {
		t.end(cs)
	}
}

// end removes cs, once; see ended.
func (t *sessionTable) end(cs *clientSession) {
	t.mu.Lock()
	if t.m[cs.id] != cs {
		t.mu.Unlock()
		return
	}
	delete(t.m, cs.id)
	t.countTenant(cs.tenant, -1)
	delete(t.bySDK, cs.ss)
	t.mu.Unlock()
	cs.mu.Lock()
	if cs.timer != nil {
		cs.timer.Stop()
		cs.timer = nil
	}
	for _, e := range cs.inflight {
		e.cancel() // the session is over: so are its calls
	}
	cs.mu.Unlock()
	cs.gone(cs)
}

// sessionEvents is the SDK's event store for the edge's streamable
// sessions (SEP-1699 resumption), which also tells the session table when
// a session ends: the transport calls SessionClosed as it closes.
type sessionEvents struct {
	*mcp.MemoryEventStore
	t *sessionTable
}

// SessionClosed implements mcp.EventStore. The SDK calls it holding the
// session's transport lock: the table's work goes to its own goroutine.
func (e sessionEvents) SessionClosed(ctx context.Context, sessionID string) error {
	err := e.MemoryEventStore.SessionClosed(ctx, sessionID)
	go e.t.ended(sessionID)
	return err
}

// startPOST holds the session open for one POST; call the returned func
// when the POST is done, which restarts the idle timer after the last one.
func (cs *clientSession) startPOST() func() {
	cs.mu.Lock()
	if cs.timer != nil && cs.refs == 0 {
		cs.timer.Stop()
	}
	cs.refs++
	cs.mu.Unlock()
	return func() {
		cs.last.Store(time.Now().UnixMilli())
		cs.mu.Lock()
		cs.refs--
		if cs.timer != nil && cs.refs == 0 {
			cs.timer.Reset(cs.timeout)
		}
		cs.mu.Unlock()
	}
}

// fastEntry is a fast-path call in flight on a session.
type fastEntry struct{ cancel context.CancelFunc }

// track records a fast-path call by its idKey; nil if a call with that id
// is already in flight on the session.
func (cs *clientSession) track(id string, cancel context.CancelFunc) *fastEntry {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, dup := cs.inflight[id]; dup || cs.viaSDK[id] > 0 {
		return nil
	}
	e := &fastEntry{cancel: cancel}
	cs.inflight[id] = e
	return e
}

// trackSDK records a request the SDK serves, so that the fast path refuses
// its id while it is in flight, as the SDK refuses ids in flight on it;
// false (nothing recorded) if the fast path is serving that id.
func (cs *clientSession) trackSDK(id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, dup := cs.inflight[id]; dup {
		return false
	}
	if cs.viaSDK == nil {
		cs.viaSDK = map[string]int{}
	}
	cs.viaSDK[id]++ // the SDK refuses a duplicate itself
	return true
}

func (cs *clientSession) untrackSDK(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.viaSDK[id]--; cs.viaSDK[id] <= 0 {
		delete(cs.viaSDK, id)
		delete(cs.cancelledSDK, id)
	}
}

// cancelSDK notes that the client cancelled the request with idKey id the
// SDK serves, reporting whether there is one.
func (cs *clientSession) cancelSDK(id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.viaSDK[id] == 0 {
		return false
	}
	if cs.cancelledSDK == nil {
		cs.cancelledSDK = map[string]bool{}
	}
	cs.cancelledSDK[id] = true
	return true
}

// cancelledBySDKClient reports whether the client cancelled the request
// with idKey id the SDK serves.
func (cs *clientSession) cancelledBySDKClient(id string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.cancelledSDK[id]
}

// untrack forgets fast-path call e, if it is still the one under id.
func (cs *clientSession) untrack(id string, e *fastEntry) {
	cs.mu.Lock()
	if cs.inflight[id] == e {
		delete(cs.inflight, id)
	}
	cs.mu.Unlock()
}

// answering takes fast-path call e out of the table before its response
// is written, reporting false when the client cancelled it first (cancel
// took it out): it then gets no response. A cancellation that comes after
// this finds no call.
func (cs *clientSession) answering(id string, e *fastEntry) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.inflight[id] != e {
		return false
	}
	delete(cs.inflight, id)
	return true
}

// cancel cancels the fast-path call with idKey id at the client's
// notifications/cancelled, reporting whether there was one: it is taken
// out of the table, so its response is never written (answering).
func (cs *clientSession) cancel(id string) bool {
	cs.mu.Lock()
	e, ok := cs.inflight[id]
	delete(cs.inflight, id)
	cs.mu.Unlock()
	if ok {
		e.cancel()
	}
	return ok
}

// relay records a request relayed to the client under relay id id (an
// idKey); its answer goes to reply.
func (cs *clientSession) relay(id, reply string) {
	cs.mu.Lock()
	cs.relayed[id] = reply
	cs.mu.Unlock()
}

// takeRelay removes and returns where the answer to relay id id goes.
func (cs *clientSession) takeRelay(id string) (string, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	reply, ok := cs.relayed[id]
	delete(cs.relayed, id)
	return reply, ok
}

// level returns the log level the client set ("" before any).
func (cs *clientSession) level() string {
	if p := cs.logLevel.Load(); p != nil {
		return *p
	}
	return ""
}
