package edge

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// A client session's resource subscriptions live in the upstream sessions
// a worker holds for it. When that worker goes (dies, or leaves
// gracefully), or another joins and takes the session over (placement
// hashes over the live workers), the session's next calls open new
// upstream sessions on another worker, without the subscriptions: a client that only waits for
// notifications/resources/updated would wait forever. So the edges keep
// each session's subscribed URIs (clientSession.subs, and the session
// record's Subs for the edges that adopt it), and when the workers of an
// upstream change they send resources/subscribe again for every URI of the sessions they
// answer for (resubscribe): the router places each on the worker that
// now serves the session, which opens its upstream session and
// subscribes there. A session still on its worker gets a subscribe it
// already has, which upstreams treat as the no-op it is. The edge's own
// listen subscriptions (2026-07-28 subscriptions/listen) are renewed the
// same way.

// resubscribeDelay is how long after the workers change the edges
// subscribe again: the routers see the change by the same heartbeats and
// must place by it.
const resubscribeDelay = 1500 * time.Millisecond

// resubscribeTries bounds the attempts of one URI's subscribe: a router
// that still places on the worker that went gets an error, and the next
// attempt comes resubscribeDelay later.
const resubscribeTries = 3

// noteSub records a 2025-era session's resources/subscribe (on) or
// resources/unsubscribe of uri that succeeded, here and in its record.
func (s *Service) noteSub(req mcp.Request, uri string, on bool) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || uri == "" {
		return
	}
	cs := s.sessions.of(ss)
	if cs == nil {
		return
	}
	cs.setSub(uri, on)
	go s.update(cs, func(r *proto.SessionRecord) {
		i := slices.Index(r.Subs, uri)
		switch {
		case on && i < 0:
			r.Subs = append(r.Subs, uri)
		case !on && i >= 0:
			r.Subs = slices.Delete(r.Subs, i, i+1)
		}
	})
}

// onPlacementChange is the presence's OnChange: when the workers that
// serve some upstream change (one joins, goes, drains, or its upstream
// goes up or down), sessions move between workers (placement hashes over
// them), and their subscriptions are made again where they are now.
func (s *Service) onPlacementChange(v *bus.View) {
	k := placementKey(v)
	if s.placement != nil && *s.placement != k {
		s.resubscribeSoon()
	}
	s.placement = &k
}

// placementKey names, for each upstream, the workers that may take its
// calls (up and not draining), in a stable order.
func placementKey(v *bus.View) string {
	ups := make([]string, 0, len(v.ByUpstream))
	for u := range v.ByUpstream {
		ups = append(ups, u)
	}
	slices.Sort(ups)
	var b strings.Builder
	for _, u := range ups {
		b.WriteString(u)
		b.WriteByte('=')
		for _, w := range v.ByUpstream[u] { // sorted by id
			if st := w.Upstreams[u]; st.Up && !w.Draining {
				b.WriteString(w.ID)
				b.WriteByte(',')
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

// resubscribeSoon runs resubscribe after resubscribeDelay, once for any
// number of workers going at once.
func (s *Service) resubscribeSoon() {
	if !s.resubPending.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(resubscribeDelay, func() {
		s.resubPending.Store(false)
		s.resubscribe(context.Background())
	})
}

// resubscribe sends resources/subscribe again for every URI of the client
// sessions this edge answers for (those it created and holds, and those
// whose GET stream it holds: where the updates go) and of its listen
// subscriptions. Failures are retried, then logged.
func (s *Service) resubscribe(ctx context.Context) {
	var reqs []proto.Request
	for _, cs := range s.sessions.all() {
		if cs.origin != "" && cs.streams.Load() == 0 {
			continue // another edge's session with no stream here
		}
		if cs.ended.Load() {
			continue
		}
		s.mu.Lock()
		v := s.views[cs.view]
		s.mu.Unlock()
		if v == nil {
			continue
		}
		for _, uri := range cs.subURIs() {
			params, _ := json.Marshal(map[string]string{"uri": uri}) // strings only: always encodes
			reqs = append(reqs, proto.Request{Method: "resources/subscribe", Tenant: v.tenant, View: v.name, Name: uri,
				Session: cs.id, Edge: cs.sessionEdge(s.cfg.ID), Protocol: cs.protocol, ClientCaps: cs.caps, Params: params})
		}
	}
	s.subs.mu.Lock()
	for _, ls := range s.subs.byURI {
		params, _ := json.Marshal(map[string]string{"uri": ls.uri})
		reqs = append(reqs, proto.Request{Method: "resources/subscribe", Tenant: ls.v.tenant, Edge: s.cfg.ID, View: ls.v.name,
			Name: ls.uri, Session: ls.session, Protocol: "2025-11-25", Params: params})
	}
	s.subs.mu.Unlock()
	if len(reqs) == 0 {
		return
	}
	s.log.Info("subscribing again after a worker went", "subscriptions", len(reqs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for try := 1; ; try++ {
				preq := reqs[i]
				cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
				_, _, err := s.roundTrip(cctx, &preq, proto.OpResourcesSubscribe, nil, nil, nil)
				cancel()
				if err == nil {
					return
				}
				if try == resubscribeTries {
					s.log.Warn("resource subscription not renewed", proto.LogSession, preq.Session, "uri", preq.Name, proto.LogErr, err)
					return
				}
				time.Sleep(resubscribeDelay)
			}
		}()
	}
	wg.Wait()
}
