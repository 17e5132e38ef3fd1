package edge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The route cache holds the routers' route grants (proto.RouteGrant): a
// tools/call whose tool has a live grant goes from the edge straight to a
// worker, one bus message instead of three (route, placement note,
// forward), and the router does not see it. Calls without one go to a
// router, whose placement note brings the grant for the next.
//
// A grant is dropped when its TTL runs out, when any router publishes on
// proto.SubjEvtRoutes (its catalog, presence or tenancy snapshot changed),
// when the edge's own tenancy snapshot changes, when its NATS connection
// comes back (revocations may have been missed), and when its worker
// leaves or answers no-responders. A grant that arrives with a call sent before
// such a drop is not kept: it may have been made from what changed.

// defaultRouteCacheTTL is how long a route grant is used (Config.RouteCacheTTL).
const defaultRouteCacheTTL = time.Second

// maxRouteGrants bounds the cache: past it, the cache starts again empty.
const maxRouteGrants = 8192

// routeGrant is one decoded grant, with the worker subjects built.
type routeGrant struct {
	upstream string
	name     string
	workers  []string
	subjects []string // switchyard.v1.grant.<w>.tools_call, by workers' index
	token    []byte   // the router's MAC (proto.RouteGrant.Token), sent with each call
	expires  time.Time
}

// routeCache maps tenant, view and tool name to a grant. Safe for
// concurrent use.
type routeCache struct {
	ttl time.Duration // <= 0: the cache is off
	rr  atomic.Uint64 // round-robin placement of sessionless calls

	mu     sync.Mutex
	gen    uint64 // guarded by mu: counts drops of every grant
	grants map[routeKey]*routeGrant
}

func newRouteCache(ttl time.Duration) *routeCache {
	return &routeCache{ttl: ttl, grants: map[routeKey]*routeGrant{}}
}

// routeKey is the cache key of a tool in a view of a tenant: the
// request's own strings, so a lookup allocates nothing.
type routeKey struct{ tenant, view, name string }

// get returns the live grant for key and the drop count it was read at.
func (c *routeCache) get(key routeKey, now time.Time) (*routeGrant, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.grants[key]
	if g != nil && !now.Before(g.expires) {
		delete(c.grants, key)
		g = nil
	}
	return g, c.gen
}

// put decodes and stores the grant data for key, unless every grant was
// dropped since gen was read (the grant may predate the change) or the
// grant is unusable. It reports whether it stored one.
func (c *routeCache) put(key routeKey, gen uint64, data []byte, now time.Time) bool {
	if c.ttl <= 0 || len(data) == 0 {
		return false
	}
	var rg proto.RouteGrant
	if proto.Unmarshal(data, &rg) != nil || rg.Upstream == "" || rg.Name == "" || len(rg.Workers) == 0 || len(rg.Token) == 0 {
		return false
	}
	g := &routeGrant{upstream: rg.Upstream, name: rg.Name, workers: rg.Workers, subjects: make([]string, len(rg.Workers)), token: rg.Token, expires: now.Add(c.ttl)}
	for i, w := range rg.Workers {
		subj, err := proto.AppendGrantSubject(nil, w, proto.OpToolsCall)
		if err != nil {
			return false // not a worker id: a router would never send it
		}
		g.subjects[i] = string(subj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return false
	}
	if len(c.grants) >= maxRouteGrants {
		c.grants = map[routeKey]*routeGrant{}
	}
	c.grants[key] = g
	return true
}

// drop forgets key's grant if it is still g.
func (c *routeCache) drop(key routeKey, g *routeGrant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.grants[key] == g {
		delete(c.grants, key)
	}
}

// dropAll forgets every grant, and any grant still on its way.
func (c *routeCache) dropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if len(c.grants) > 0 {
		c.grants = map[routeKey]*routeGrant{}
	}
}

// dropOnReconnect drops every grant each time nc connects again, until ctx
// ends: revocations published while it was away never reached it.
func (c *routeCache) dropOnReconnect(ctx context.Context, nc *nats.Conn) {
	ch := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			c.dropAll()
		}
	}
}

// place returns the index in g.workers of the worker a call of session
// (from edge) goes to, as a router would place it.
func (c *routeCache) place(g *routeGrant, edge, session string) int {
	return bus.Place(g.workers, edge, session, g.upstream, &c.rr)
}

// callRoute is how one attempt of a call is sent: through a router
// (grant nil; key set when the router's note may bring a grant for the
// next calls) or straight to a worker.
type callRoute struct {
	key     routeKey // the route cache key
	cached  bool     // a tools/call with the cache on: key is set
	gen     uint64   // the cache's drop count when the call was sent
	grant   *routeGrant
	worker  string // with grant: the worker placed on
	subject string // with grant: its subject
}

// routeOf returns how preq (op) is sent. Only tools/call is granted.
func (s *Service) routeOf(preq *proto.Request, op string) callRoute {
	c := s.grants
	if op != proto.OpToolsCall || c.ttl <= 0 {
		return callRoute{}
	}
	rt := callRoute{key: routeKey{preq.Tenant, preq.View, preq.Name}, cached: true}
	g, gen := c.get(rt.key, time.Now())
	rt.gen = gen
	if g != nil {
		i := c.place(g, preq.Edge, preq.Session)
		if w := g.workers[i]; s.presence.Gone(w) || s.presence.Draining(w) {
			c.drop(rt.key, g)
		} else {
			rt.grant, rt.worker, rt.subject = g, g.workers[i], g.subjects[i]
		}
	}
	s.met.RouteCache(rt.grant != nil)
	return rt
}

// marshal encodes preq as sent on rt: a granted call carries the
// upstream and the upstream's name of the tool, as a router fills them.
func (rt *callRoute) marshal(preq *proto.Request) ([]byte, error) {
	if rt.grant == nil {
		return proto.Marshal(preq)
	}
	name := preq.Name
	preq.Upstream, preq.Name, preq.Grant = rt.grant.upstream, rt.grant.name, rt.grant.token
	data, err := proto.Marshal(preq)
	preq.Upstream, preq.Name, preq.Grant = "", name, nil
	return data, err
}

// noteRoute updates the cache from an attempt's outcome: a grant whose
// worker did not take the call is dropped; a router's grant that came
// with a call that ran is kept.
func (s *Service) noteRoute(rt *callRoute, k *bus.Call, err error) {
	if !rt.cached {
		return
	}
	if rt.grant != nil {
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.CodeNotDelivered || pe.Code == proto.CodeWorkerLost) {
			s.grants.drop(rt.key, rt.grant)
		}
		return
	}
	if err == nil {
		s.grants.put(rt.key, rt.gen, k.Grant(), time.Now())
	}
}
