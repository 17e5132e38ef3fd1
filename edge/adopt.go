package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/edge/internal/sessionstore"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/limit"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Any edge serves any stateful (2025-era streamable HTTP) session, and a
// session outlives the edge that created it (docs/architecture.md,
// "Sessions"):
//
//   - the edge that creates a session stores its record (the client's
//     initialize params, the negotiated version, the view and owner) in
//     the KV bucket switchyard_sessions before answering the initialize
//     (storeNew), and keeps it current: the log level (storeLevel), and
//     while the session is in use, its last activity (touch);
//   - an edge that receives a request for a session it does not hold reads
//     the record and adopts the session (adopt): it recreates the SDK
//     session under the same id by replaying the initialize and
//     notifications/initialized into its own SDK handler, so the client
//     goes on without initializing again;
//   - the session's requests carry its origin edge's name wherever they
//     are served, so workers keep its upstream sessions and task ids keep
//     opening;
//   - a session ends once for all: DELETE or the idle timeout on any edge
//     deletes the record and publishes session_closed, on which the other
//     edges drop their copies. An edge whose copy is idle while another
//     edge serves the session (the record's activity is recent) drops its
//     copy only.

// hdrAdopt marks the replayed initialize of an adoption (its value is the
// record's origin), for onInitialize. The edge deletes it from every
// request a client sends.
const hdrAdopt = "Switchyard-Adopt"

// storeTimeout bounds one session record read or write.
const storeTimeout = 2 * time.Second

// runSessionStore opens the session store, retrying until it exists (a
// tenancy-svc creates it) or ctx ends, then drops this edge's copy of every
// session another edge ends. The edge is not ready before the store is
// open.
func (s *Service) runSessionStore(ctx context.Context, js jetstream.JetStream) {
	backoff, logged := 100*time.Millisecond, false
	for {
		st, err := sessionstore.Open(ctx, js)
		if err == nil {
			s.store.Store(st)
			break
		}
		if !logged {
			s.log.Info("session store not open yet", proto.LogErr, err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	sub, err := s.nc.Subscribe(proto.SubjEvtSessionClosedAll, bus.Guard(proto.SubjEvtSessionClosedAll, s.onSessionClosed))
	if err != nil {
		s.log.Error("session_closed not subscribed", proto.LogErr, err)
		return
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
}

// onSessionClosed drops this edge's copy of a session that ended (on
// another edge: this edge removes its own sessions before it publishes).
func (s *Service) onSessionClosed(m *nats.Msg) {
	if proto.LastToken(m.Subject) == s.cfg.ID {
		return // published here: this edge ends its copy itself
	}
	var ev proto.SessionClosed
	if proto.Unmarshal(m.Data, &ev) != nil {
		return
	}
	if cs := s.sessions.get(ev.Session); cs != nil && cs.ss != nil {
		if d := slowSessionClosed.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		cs.ended.Store(true)
		cs.dropOnly.Store(true)
		_ = cs.ss.Close()
	}
	if m.Reply != "" { // a DELETE waits for every edge to have dropped its copy
		if err := s.nc.Publish(m.Reply, nil); err != nil {
			s.log.Debug("session_closed not acknowledged", proto.LogErr, err)
		}
	}
}

// sessionRecord is the session record of cs, created on this edge in view v.
func (s *Service) sessionRecord(v *view, cs *clientSession, init []byte) *proto.SessionRecord {
	rec := &proto.SessionRecord{ID: cs.id, Origin: cs.sessionEdge(s.cfg.ID), Tenant: v.tenant, View: v.name,
		Owner: cs.owner, Protocol: cs.protocol, Init: init, LogLevel: cs.level(), Active: time.Now().UnixMilli()}
	return rec
}

// storeNew stores the record of cs, just created on this edge by
// initialize params ip, before its initialize is answered. Without a store
// (not open yet) or on error the session is this edge's only.
func (s *Service) storeNew(v *view, cs *clientSession, ss *mcp.ServerSession) {
	st := s.store.Load()
	if st == nil || cs == nil {
		return
	}
	init, err := initJSON(ss.InitializeParams())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rec := s.sessionRecord(v, cs, init)
	if err := st.Put(ctx, rec); err != nil {
		s.log.Warn("session record not stored", proto.LogSession, cs.id, proto.LogErr, err)
		return
	}
	cs.stored.Store(rec.Active)
}

// initJSON encodes initialize params for a record, with the capabilities
// as the client sent them (capsJSON): a replay then declares the same.
func initJSON(ip *mcp.InitializeParams) ([]byte, error) {
	b, err := json.Marshal(ip)
	if err != nil || ip == nil || ip.Capabilities == nil {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["capabilities"] = capsJSON(ip.Capabilities)
	return json.Marshal(m)
}

// restoreWindow is how long after the store was made again (the NATS store
// lost, tenancy-svc seeded it anew) a session without a record is answered
// 503 rather than 404: the edge holding it writes its record back
// (restoreRecords) within a probe interval of seeing the new store.
const restoreWindow = 5 * time.Second

// storeRebuilding reports whether the NATS store is lost and not seeded
// again yet, or was seeded again within restoreWindow: a missing record
// may be one an edge is about to write back.
func (s *Service) storeRebuilding() bool {
	if s.seed == nil {
		return false
	}
	return !s.seed.Seeded() || time.Since(s.seed.Reseeded()) < restoreWindow
}

// restoreRecords writes back the records of the sessions this edge holds
// after the NATS store was lost and seeded again (tenancy.SeedProbe's
// OnReseed): the sessions stay adoptable by every edge. A session idle
// long enough to have left the edge's memory (evict.go) had only its
// record, and is lost with the store: its client initializes again.
func (s *Service) restoreRecords() {
	st := s.store.Load()
	if st == nil {
		return
	}
	n := 0
	for _, cs := range s.sessions.all() {
		if cs.ss == nil || cs.stored.Load() == 0 || cs.dropOnly.Load() {
			continue // legacy SSE (no record), or ending
		}
		init, err := initJSON(cs.ss.InitializeParams())
		if err != nil {
			continue
		}
		rec := &proto.SessionRecord{ID: cs.id, Origin: cs.sessionEdge(s.cfg.ID), Tenant: cs.tenant,
			View: strings.TrimPrefix(cs.view, cs.tenant+"/"), Owner: cs.owner, Protocol: cs.protocol,
			Init: init, LogLevel: cs.level(), Active: time.Now().UnixMilli()}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err = st.Put(ctx, rec)
		cancel()
		if err != nil {
			s.log.Warn("session record not restored", proto.LogSession, cs.id, proto.LogErr, err)
			continue
		}
		cs.stored.Store(rec.Active)
		n++
	}
	s.log.Info("session records restored after the store was lost", "sessions", n)
}

// update rewrites cs's record with change applied; false if there is none
// (the session has no record, or the store is not open).
func (s *Service) update(cs *clientSession, change func(*proto.SessionRecord)) bool {
	st := s.store.Load()
	if st == nil || cs.stored.Load() == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	now := time.Now().UnixMilli()
	// A read, a change and a write at that revision: two edges updating
	// one record at once both count, and a record deleted meanwhile (the
	// session ended) stays deleted.
	rec, err := st.Update(ctx, cs.id, func(r *proto.SessionRecord) {
		change(r)
		r.Active = now
	})
	if err != nil {
		if !errors.Is(err, sessionstore.ErrNotFound) {
			s.log.Warn("session record not stored", proto.LogSession, cs.id, proto.LogErr, err)
		}
		return false
	}
	cs.stored.Store(rec.Active)
	return true
}

// storeLevel records the session's new log level, for the edges that
// adopt it later, and tells the edges holding a copy now.
func (s *Service) storeLevel(cs *clientSession, level string) {
	s.update(cs, func(r *proto.SessionRecord) { r.LogLevel = level })
	subj, err := proto.EvtSessionLevelSubject(s.cfg.ID)
	if err != nil {
		return
	}
	if data, err := proto.Marshal(&proto.SessionLevel{Session: cs.id, Level: level}); err == nil {
		_ = s.nc.Publish(subj, data)
	}
}

// onSessionLevel sets the log level another edge's client set on this
// edge's copy of the session.
func (s *Service) onSessionLevel(m *nats.Msg) {
	var ev proto.SessionLevel
	if proto.Unmarshal(m.Data, &ev) != nil {
		return
	}
	if cs := s.sessions.get(ev.Session); cs != nil {
		lv := ev.Level
		cs.logLevel.Store(&lv)
	}
}

// touch records that cs is in use, at most every quarter of its idle
// timeout, in the background: the edges holding an idle copy of it keep
// the session alive while this one serves it (sessionIdle).
func (s *Service) touch(cs *clientSession) {
	last := cs.stored.Load()
	if last == 0 || cs.timeout <= 0 {
		return
	}
	now := time.Now().UnixMilli()
	if time.Duration(now-last)*time.Millisecond < cs.timeout/4 || !cs.stored.CompareAndSwap(last, now) {
		return
	}
	go s.update(cs, func(*proto.SessionRecord) {})
}

// sessionIdle is called when cs had no request on this edge for its idle
// timeout: the session ends, unless another edge used it within that time
// (its record says so), in which case this edge drops its copy only.
func (s *Service) sessionIdle(cs *clientSession) {
	if st := s.store.Load(); st != nil && cs.stored.Load() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		rec, err := st.Get(ctx, cs.id)
		cancel()
		// Another edge used it if the record's activity is newer than
		// what this edge last wrote there, and recent.
		if err == nil && rec.Active > cs.stored.Load() && time.Since(time.UnixMilli(rec.Active)) < cs.timeout {
			// This copy goes; a tombstone ends the session later if the
			// other edge's use idles out without an end (evict.go).
			cs.dropOnly.Store(true)
			s.entomb(cs)
		}
	}
	_ = cs.ss.Close()
}

// endForAll ends cs for every edge now, before this edge closes its copy
// (a DELETE): its record is deleted and session_closed published and
// flushed, so that the client's next request, wherever it lands, finds no
// session. The copy's own end then does nothing more.
func (s *Service) endForAll(cs *clientSession) {
	cs.ended.Store(true)
	if cs.dropOnly.Swap(true) {
		return // ended already
	}
	s.deleteRecord(cs)
	s.closeAcked(cs.sessionEdge(s.cfg.ID), cs.id)
}

// slowSessionClosed delays an edge's handling of another edge's
// session_closed event, in tests (0 in production).
var slowSessionClosed atomic.Int64 // nanoseconds

// closeAckWait bounds how long a DELETE waits for the other edges to drop
// their copies of the session.
const closeAckWait = time.Second

// closeAcked publishes the session_closed event of session id (origin
// edge) and waits, up to closeAckWait, until every other live edge
// (limit.Fleet) has acknowledged it, having dropped its copy: a request
// the client sends next, to any edge, finds no session.
func (s *Service) closeAcked(edge, id string) {
	others := s.fleet.View().N() - 1
	if others <= 0 {
		s.publishClosed(edge, id)
		_ = s.nc.FlushTimeout(closeAckWait)
		return
	}
	subj, err := proto.EvtSessionClosedSubject(s.cfg.ID)
	var data []byte
	if err == nil {
		data, err = proto.Marshal(&proto.SessionClosed{Edge: edge, Session: id})
	}
	var sub *nats.Subscription
	inbox := s.nc.NewInbox()
	if err == nil {
		sub, err = s.nc.SubscribeSync(inbox)
	}
	if err == nil {
		defer func() { _ = sub.Unsubscribe() }()
		err = s.nc.PublishMsg(&nats.Msg{Subject: subj, Reply: inbox, Data: data})
	}
	if err != nil {
		s.log.Warn("session_closed not published", proto.LogSession, id, proto.LogErr, err)
		return
	}
	deadline := time.Now().Add(closeAckWait)
	for got := 0; got < others; got++ {
		if _, err := sub.NextMsg(time.Until(deadline)); err != nil {
			return // an edge gone or slow: its copy ends at its own timeout or at the event
		}
	}
}

// sessionEnded is told when cs ended on this edge: unless only this edge's
// copy went, its record is deleted and the workers (and the other edges)
// are told.
func (s *Service) sessionEnded(cs *clientSession) {
	if cs.dropOnly.Load() {
		return
	}
	s.endRecord(cs)
}

// endRecord deletes cs's record and publishes its session_closed.
func (s *Service) endRecord(cs *clientSession) {
	s.deleteRecord(cs)
	s.publishClosed(cs.sessionEdge(s.cfg.ID), cs.id)
}

// deleteRecord deletes cs's record, if this edge stored or read one.
func (s *Service) deleteRecord(cs *clientSession) {
	if st := s.store.Load(); st != nil && cs.stored.Load() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		if err := st.Delete(ctx, cs.id); err != nil {
			s.log.Warn("session record not deleted", proto.LogSession, cs.id, proto.LogErr, err)
		}
		cancel()
	}
}

// afterAdoptRead, in tests, runs after an adoption read the session's
// record (nil in production).
var afterAdoptRead atomic.Pointer[func(sid string)]

// adoptLocks serialize the adoptions of one session id (a client's GET and
// POST may arrive at once): an id takes the lock its hash picks.
type adoptLocks [64]sync.Mutex

func (l *adoptLocks) of(sid string) *sync.Mutex {
	h := uint32(2166136261)
	for i := 0; i < len(sid); i++ {
		h = (h ^ uint32(sid[i])) * 16777619
	}
	return &l[h%uint32(len(l))]
}

// The outcomes of an adoption other than success or "no such session"
// (the request then goes on and is answered as a session not found).
const (
	adoptNone      = iota // no such session for this caller and view
	adoptOK               // held now
	adoptCap              // the edge's session cap
	adoptTenant           // the tenant's session cap
	adoptStoreDown        // the session store could not be read
)

// adoptRefusal answers a request whose session exists but could not be
// adopted here now (a cap, the store unreachable): the session is not
// over, so not 404 (which tells a client to start again) but 503 or 429
// with Retry-After, as a refused initialize gets.
func adoptRefusal(w http.ResponseWriter, outcome int) {
	w.Header().Set("Retry-After", "1")
	switch outcome {
	case adoptTenant:
		perr := limit.SessionsRefused(sessionRetryAfter)
		writeRPCErrorData(w, http.StatusTooManyRequests, nil, int(perr.Code), perr.Msg, perr.Data)
	case adoptCap:
		writeRPCError(w, http.StatusServiceUnavailable, nil, int(proto.CodeUnavailable), "the edge holds its maximum of sessions; retry later, or on another edge")
	default:
		writeRPCError(w, http.StatusServiceUnavailable, nil, int(proto.CodeUnavailable), "the session store is unavailable; retry later")
	}
}

// adopt makes the session sid, which this edge does not hold, this edge's
// if its record exists and belongs to v and to r's caller, by replaying
// its initialize into v's SDK handler under the same id. It returns
// adoptOK when the session is held now, adoptNone when there is no such
// session (the request goes on and is answered as a session not found),
// or the refusal to answer with (adoptRefusal).
func (s *Service) adopt(r *http.Request, v *view, sid string) int {
	st := s.store.Load()
	if st == nil || !sessionstore.ValidID(sid) {
		return adoptNone
	}
	mu := s.adoptLocks.of(sid)
	mu.Lock()
	defer mu.Unlock()
	if s.sessions.get(sid) != nil {
		return adoptOK // adopted by a concurrent request
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	rec, err := st.Get(ctx, sid)
	cancel()
	if err != nil {
		if !errors.Is(err, sessionstore.ErrNotFound) {
			s.log.Warn("session record not read", proto.LogSession, sid, proto.LogErr, err)
			return adoptStoreDown
		}
		if s.storeRebuilding() {
			return adoptStoreDown // its record may be on its way back
		}
		return adoptNone
	}
	if h := afterAdoptRead.Load(); h != nil {
		(*h)(sid)
	}
	user := ""
	if id := identityOf(r.Context()); id != nil {
		user = id.user
	}
	if rec.Tenant != v.tenant || rec.View != v.name || rec.Owner != user {
		return adoptNone // another view's or caller's session reads as none
	}
	if to := s.cfg.SessionTimeout; to > 0 && time.Since(time.UnixMilli(rec.Active)) > to {
		return adoptNone // idle past the timeout: over (its edge died before ending it)
	}
	release, token, which := s.sessions.reserve(v.tenant, s.cfg.MaxSessions, s.cfg.MaxTenantSessions)
	switch which {
	case capEdge:
		return adoptCap
	case capTenant:
		return adoptTenant
	}
	defer release()

	// The replayed requests carry the client's identity (the SDK binds the
	// session to its user) and this request's context values.
	post := func(body string, hdr http.Header) *httptest.ResponseRecorder {
		req := r.Clone(context.WithoutCancel(r.Context()))
		req.Method, req.Body, req.ContentLength = http.MethodPost, http.NoBody, int64(len(body))
		req.Body = readCloser{strings.NewReader(body)}
		req.Header = hdr
		w := httptest.NewRecorder()
		v.ServeHTTP(w, req)
		return w
	}
	base := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	if a := r.Header.Get("Authorization"); a != "" {
		base.Set("Authorization", a)
	}
	init := base.Clone()
	init.Set(hdrSessionSlot, token)
	init.Set(hdrAdopt, rec.Origin)
	body := `{"jsonrpc":"2.0","id":"adopt","method":"initialize","params":` + string(rec.Init) + `}`
	v.newIDs.Lock()
	v.adoptID.Store(&sid)
	w := post(body, init)
	v.adoptID.Store(nil)
	v.newIDs.Unlock()
	if w.Code != http.StatusOK || w.Header().Get("Mcp-Session-Id") != sid {
		s.log.Warn("session not adopted", proto.LogSession, sid, "status", w.Code)
		return adoptNone
	}
	cs := s.sessions.get(sid)
	if cs == nil {
		return adoptNone
	}
	if rec.LogLevel != "" {
		lv := rec.LogLevel
		cs.logLevel.Store(&lv)
	}
	for _, uri := range rec.Subs {
		cs.setSub(uri, true)
	}
	// The record's activity time as written: the first request here
	// writes it anew (touch), so the other edges see the session in use.
	cs.stored.Store(max(rec.Active, 1))
	done := base.Clone()
	done.Set("Mcp-Session-Id", sid)
	done.Set("Mcp-Protocol-Version", rec.Protocol)
	if w := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, done); w.Code != http.StatusAccepted {
		s.log.Warn("session not adopted", proto.LogSession, sid, "status", w.Code)
		cs.dropOnly.Store(true)
		_ = cs.ss.Close()
		return adoptNone
	}
	// A DELETE at another edge may have ended the session while this one
	// replayed it (after its record was read here, before this copy was
	// in the table to hear the session_closed): the record says.
	ctx, cancel = context.WithTimeout(context.Background(), storeTimeout)
	exists, err := st.Exists(ctx, sid) // at the leader: a replica may lag the delete
	cancel()
	if err == nil && !exists {
		cs.ended.Store(true)
		cs.dropOnly.Store(true)
		_ = cs.ss.Close()
		return adoptNone
	}
	s.log.Info("session adopted", proto.LogSession, sid, "origin", rec.Origin)
	return adoptOK
}

// readCloser is a strings.Reader as a request body.
type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
