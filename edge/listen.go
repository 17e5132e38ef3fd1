package edge

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// A 2026-07-28 client subscribes to a resource on a subscriptions/listen
// stream, which the SDK's stateless handler serves: it calls the view's
// SubscribeHandler for each URI when the stream opens and the
// UnsubscribeHandler when it ends, and Server.ResourceUpdated delivers
// notifications/resources/updated to every stream subscribed to the URI.
// The edge holds one upstream subscription per (view, URI) for all such
// streams, under a client session of its own ("<edge>-listen-<token>"), so
// the worker keeps a dedicated upstream session for it and sends its
// updates to this edge (switchyard.v1.edge.<edge>.msg). One update then
// reaches each subscribed stream once.

// listenSub is the edge's upstream subscription to one URI of one view.
type listenSub struct {
	v            *view
	uri, session string
	refs         int
}

// listens holds the listenSubs by (view, URI) and by session id. Safe for
// concurrent use.
type listens struct {
	mu        sync.Mutex
	byURI     map[[2]string]*listenSub // guarded by mu
	bySession map[string]*listenSub    // guarded by mu
}

// listenPrefix marks the edge's own session ids for listen subscriptions.
const listenPrefix = "-listen-"

// subscribeHandler is the view's ServerOptions.SubscribeHandler: it opens
// the upstream subscription of a URI the first time a stream asks for it.
func (s *Service) subscribeHandler(v *view) func(context.Context, *mcp.SubscribeRequest) error {
	return func(ctx context.Context, req *mcp.SubscribeRequest) error {
		// A subscription request is held to the tenant's limits like a
		// call (its first one for a URI goes on the bus); an unsubscribe
		// never is.
		lreq := proto.Request{Tenant: v.tenant}
		if ex := req.Extra; ex != nil && ex.TokenInfo != nil {
			lreq.Principal, _ = ex.TokenInfo.Extra[principalExtra].(string)
		}
		done, perr := s.admit(&lreq)
		if perr != nil {
			return s.toJSONRPC(ctx, perr, "resources/subscribe")
		}
		defer done()
		uri := req.Params.URI
		s.subs.mu.Lock()
		if s.subs.byURI == nil {
			s.subs.byURI, s.subs.bySession = map[[2]string]*listenSub{}, map[string]*listenSub{}
		}
		ls := s.subs.byURI[[2]string{v.key, uri}]
		if ls != nil {
			ls.refs++
			s.subs.mu.Unlock()
			return nil
		}
		ls = &listenSub{v: v, uri: uri, session: s.cfg.ID + listenPrefix + bus.RandomToken(15), refs: 1}
		s.subs.byURI[[2]string{v.key, uri}], s.subs.bySession[ls.session] = ls, ls
		s.subs.mu.Unlock()
		if err := s.upstreamSubscribe(ctx, ls, "resources/subscribe", proto.OpResourcesSubscribe); err != nil {
			s.dropListen(ls)
			return err
		}
		return nil
	}
}

// unsubscribeHandler is the view's ServerOptions.UnsubscribeHandler: the
// last stream of a URI ends its upstream subscription and session.
func (s *Service) unsubscribeHandler(v *view) func(context.Context, *mcp.UnsubscribeRequest) error {
	return func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		s.subs.mu.Lock()
		ls := s.subs.byURI[[2]string{v.key, req.Params.URI}]
		if ls != nil {
			ls.refs--
		}
		last := ls != nil && ls.refs == 0
		s.subs.mu.Unlock()
		if last {
			_ = s.upstreamSubscribe(context.WithoutCancel(ctx), ls, "resources/unsubscribe", proto.OpResourcesUnsubscribe)
			s.dropListen(ls)
		}
		return nil
	}
}

// dropListen forgets ls (its subscription failed, or its last stream
// ended) and ends its session, so the worker closes its upstream session.
func (s *Service) dropListen(ls *listenSub) {
	s.subs.mu.Lock()
	if s.subs.byURI[[2]string{ls.v.key, ls.uri}] == ls {
		delete(s.subs.byURI, [2]string{ls.v.key, ls.uri})
	}
	delete(s.subs.bySession, ls.session)
	s.subs.mu.Unlock()
	s.publishSessionClosed(ls.session)
}

// upstreamSubscribe sends resources/(un)subscribe for ls's URI as a
// 2025-11-25 request of ls's session.
func (s *Service) upstreamSubscribe(ctx context.Context, ls *listenSub, method, op string) error {
	params, _ := json.Marshal(map[string]string{"uri": ls.uri})
	preq := proto.Request{Method: method, Tenant: ls.v.tenant, Edge: s.cfg.ID, View: ls.v.name, Name: ls.uri,
		Session: ls.session, Protocol: "2025-11-25", Params: params}
	_, _, err := s.roundTrip(ctx, &preq, op, nil, nil, nil)
	return err
}

// onListenMsg delivers a session-level upstream message of one of the
// edge's listen sessions: a resources/updated goes to every stream of the
// view subscribed to the URI; anything else is not for a listen stream.
func (s *Service) onListenMsg(m *nats.Msg) bool {
	sid := m.Header.Get(proto.HdrSession)
	if !strings.Contains(sid, listenPrefix) {
		return false
	}
	s.subs.mu.Lock()
	ls := s.subs.bySession[sid]
	s.subs.mu.Unlock()
	u, ok := parseUpMsg(m)
	if ls == nil || !ok {
		return true
	}
	if u.id != nil {
		s.refuse(u, "a resource subscription takes no requests")
		return true
	}
	if u.method != "notifications/resources/updated" {
		return true
	}
	var uri string
	jsonscan.Members(u.params, func(k, v []byte) {
		if jsonscan.KeyIs(k, "uri") && len(v) > 0 && v[0] == '"' {
			uri = jsonscan.Unquote(v)
		}
	})
	if v := ls.v; uri != "" {
		_ = v.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
	return true
}
