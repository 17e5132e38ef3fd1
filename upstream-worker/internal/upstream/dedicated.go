package upstream

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// dedicatedFor returns the lazy session of one client session, creating
// the entry on first use; its session declares caps, the client's
// capabilities (raw JSON) from the call that created it.
func (u *Upstream) dedicatedFor(edge, session string, caps []byte) (*lazy, *proto.Error) {
	k := sessKey{edge, session}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stopped {
		return nil, u.unavailable(errStopped.Error())
	}
	l := u.dedicated[k]
	if l == nil {
		l = u.newLazy(&k, caps)
		l.lastUsed.Store(time.Now().UnixNano())
		u.dedicated[k] = l
	}
	return l, nil
}

// SessionClosed closes the upstream session held for the client session
// (edge, session), if any, and forgets its resource subscriptions on the
// shared sessions (event proto.SessionClosed). It does not block.
func (u *Upstream) SessionClosed(edge, session string) {
	k := sessKey{edge, session}
	u.levels.forget(k)
	u.mu.Lock()
	l := u.dedicated[k]
	delete(u.dedicated, k)
	u.mu.Unlock()
	if l != nil {
		l.kill()
	}
	for _, s := range u.snap.Load().procs {
		if orphans := s.dropSubscriber(k); len(orphans) > 0 {
			go u.unsubscribeOn(s, orphans)
		}
	}
	if s := u.pool.current(); s != nil {
		if orphans := s.dropSubscriber(k); len(orphans) > 0 {
			go u.unsubscribeOn(s, orphans)
		}
	}
}

// unsubscribeOn sends resources/unsubscribe on the shared session s for
// each of uris, whose last subscriber left with its client session: the
// upstream stops sending updates nobody receives. A URI subscribed again
// meanwhile is skipped; one subscribed again while the unsubscribe was on
// its way is subscribed again upstream, so the new subscriber keeps its
// updates. Failures are logged; the session may be gone.
func (u *Upstream) unsubscribeOn(s *session, uris []string) {
	ctx, cancel := context.WithTimeout(context.Background(), u.opts.CatalogTimeout)
	defer cancel()
	for _, uri := range uris {
		if s.hasSubscribers(uri) {
			continue
		}
		err := u.subscription(ctx, s, methodUnsubscribe, uri)
		if err == nil && s.hasSubscribers(uri) {
			err = u.subscription(ctx, s, methodSubscribe, uri)
		}
		if err != nil {
			u.log.Debug("unsubscribe of a closed session's resource failed", proto.LogErr, err)
		}
	}
}

// subscription sends resources/subscribe or resources/unsubscribe (method)
// for uri on session s, as Request would.
func (u *Upstream) subscription(ctx context.Context, s *session, method, uri string) error {
	params, _ := json.Marshal(map[string]string{"uri": uri})
	req := &proto.Request{Method: method, Params: params}
	p, perr := newForwardParams(req)
	if perr != nil {
		return perr
	}
	st := u.beginCall(ctx, req)
	defer st.end()
	attempt := func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
		return u.callRawOn(ctx, s, l, p, st)
	}
	if !u.rawCalls {
		f, _ := sdkRequest(p) // {"uri": string} always decodes
		attempt = func(ctx context.Context, s *session, l *lazy) ([]byte, error) { return u.forwardOn(ctx, s, l, f) }
	}
	if a, perr := listenOn2026(p, attempt, u); perr == nil {
		attempt = a // a 2026-07-28 session subscribes on its listen stream
	}
	_, err := attempt(ctx, s, nil)
	return err
}

// Dedicated returns the number of dedicated sessions held (for tests and
// metrics).
func (u *Upstream) Dedicated() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.dedicated)
}

func (u *Upstream) closeDedicated() {
	u.mu.Lock()
	all := u.dedicated
	u.dedicated = map[sessKey]*lazy{}
	u.mu.Unlock()
	for _, l := range all {
		l.kill()
	}
}

// sweep closes dedicated sessions idle for IdleTimeout, until ctx ends.
func (u *Upstream) sweep(ctx context.Context) {
	if !u.isHTTP() {
		return
	}
	every := min(max(u.opts.IdleTimeout/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			u.sweepOnce(now)
		}
	}
}

func (u *Upstream) sweepOnce(now time.Time) {
	var idle []*lazy
	u.mu.Lock()
	for k, l := range u.dedicated {
		if l.idle(now, u.opts.IdleTimeout) {
			idle = append(idle, l)
			delete(u.dedicated, k)
		}
	}
	u.mu.Unlock()
	for _, l := range idle {
		l.kill()
	}
	if len(idle) > 0 {
		u.log.Debug("idle upstream sessions closed")
	}
}
