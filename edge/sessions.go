package edge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	owner    string      // the identity's user that created it ("" anonymous)
	protocol string      // negotiated by initialize
	caps     []byte      // the client's capabilities from initialize, as JSON
	ready    atomic.Bool // notifications/initialized arrived

	mu       sync.Mutex
	refs     int         // guarded by mu: POSTs in progress
	timer    *time.Timer // guarded by mu: nil without a timeout or once closed
	timeout  time.Duration
	inflight map[string]context.CancelFunc // guarded by mu: fast-path calls by idKey
	viaSDK   map[string]int                // guarded by mu: requests the SDK serves, by idKey
	relayed  map[string]string             // guarded by mu: relay id -> where the client's answer goes
	asks     sync.WaitGroup                // session-level relayed requests in flight
	aliased  aliases                       // ids the SDK could not echo, in flight
	logLevel atomic.Pointer[string]        // the level of the client's last logging/setLevel
}

// sessionTable holds the edge's stateful client sessions by session id,
// and by SDK session. Safe for concurrent use.
type sessionTable struct {
	mu    sync.RWMutex
	m     map[string]*clientSession             // guarded by mu
	bySDK map[*mcp.ServerSession]*clientSession // guarded by mu
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
// session ends, and gone is called then. A timeout > 0 closes the session
// after that long without a POST.
func (t *sessionTable) add(ss *mcp.ServerSession, id, view, owner, protocol string, timeout time.Duration, gone func(id string)) {
	cs := &clientSession{id: id, ss: ss, view: view, owner: owner, protocol: protocol, timeout: timeout,
		inflight: map[string]context.CancelFunc{}, relayed: map[string]string{}}
	if timeout > 0 {
		cs.timer = time.AfterFunc(timeout, func() { _ = ss.Close() })
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*clientSession{}
	}
	t.m[id] = cs
	if t.bySDK == nil {
		t.bySDK = map[*mcp.ServerSession]*clientSession{}
	}
	t.bySDK[ss] = cs
	t.mu.Unlock()
	go func() {
		_ = ss.Wait()
		t.mu.Lock()
		if t.m[id] == cs {
			delete(t.m, id)
		}
		delete(t.bySDK, ss)
		t.mu.Unlock()
		cs.mu.Lock()
		if cs.timer != nil {
			cs.timer.Stop()
			cs.timer = nil
		}
		for _, cancel := range cs.inflight {
			cancel() // the session is over: so are its calls
		}
		cs.mu.Unlock()
		gone(id)
	}()
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
		cs.mu.Lock()
		cs.refs--
		if cs.timer != nil && cs.refs == 0 {
			cs.timer.Reset(cs.timeout)
		}
		cs.mu.Unlock()
	}
}

// track records a fast-path call by its idKey; false if a call with that
// id is already in flight on the session.
func (cs *clientSession) track(id string, cancel context.CancelFunc) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if _, dup := cs.inflight[id]; dup || cs.viaSDK[id] > 0 {
		return false
	}
	cs.inflight[id] = cancel
	return true
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
	}
}

func (cs *clientSession) untrack(id string) {
	cs.mu.Lock()
	delete(cs.inflight, id)
	cs.mu.Unlock()
}

// cancel cancels the fast-path call with idKey id, reporting whether there
// was one.
func (cs *clientSession) cancel(id string) bool {
	cs.mu.Lock()
	c, ok := cs.inflight[id]
	cs.mu.Unlock()
	if ok {
		c()
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
