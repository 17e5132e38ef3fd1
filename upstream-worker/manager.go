package worker

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/upstream"
)

// manager keeps one upstream actor per served catalog entry. The catalog
// watch calls Put, Delete and Synced (one goroutine); intake reads the
// immutable view from any goroutine.
type manager struct {
	s     *Service
	ctx   context.Context // parent of every actor; cancelled at shutdown
	tools upstream.ToolStore
	wg    sync.WaitGroup // actor goroutines

	view atomic.Pointer[map[string]*upstream.Upstream]

	mu     sync.Mutex
	actors map[string]*actor // guarded by mu
}

type actor struct {
	u      *upstream.Upstream
	cancel context.CancelFunc
	sub    *nats.Subscription // the upstream's pool subject
}

func newManager(s *Service, ctx context.Context, tools upstream.ToolStore) *manager {
	m := &manager{s: s, ctx: ctx, tools: tools, actors: map[string]*actor{}}
	m.view.Store(&map[string]*upstream.Upstream{})
	return m
}

// get returns the actor serving name, or nil.
func (m *manager) get(name string) *upstream.Upstream { return (*m.view.Load())[name] }

// all returns the current actors.
func (m *manager) all() map[string]*upstream.Upstream { return *m.view.Load() }

// Put starts (or, for a changed spec, restarts) the actor of spec.
func (m *manager) Put(spec proto.UpstreamSpec) {
	if len(m.s.serves) > 0 && !m.s.serves[spec.Name] {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.actors[spec.Name]; old != nil {
		if sameSpec(old.u.Spec(), spec) {
			return
		}
		m.s.log.Info("upstream spec changed, restarting", proto.LogUpstream, spec.Name)
		m.stopLocked(old)
	}
	a, err := m.start(spec)
	if err != nil {
		m.s.log.Error("cannot serve upstream", proto.LogUpstream, spec.Name, proto.LogErr, err)
		delete(m.actors, spec.Name)
	} else {
		m.actors[spec.Name] = a
	}
	m.publishLocked()
}

// Delete stops the actor of name, if any.
func (m *manager) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.actors[name]; a != nil {
		m.s.log.Info("upstream removed from the catalog", proto.LogUpstream, name)
		m.stopLocked(a)
		delete(m.actors, name)
		m.publishLocked()
		m.s.met.Forget(name)
	}
}

// Synced marks the catalog loaded.
func (m *manager) Synced() {
	if !m.s.synced.Swap(true) {
		m.s.log.Info("upstream catalog loaded")
	}
}

func (m *manager) start(spec proto.UpstreamSpec) (*actor, error) {
	o := upstream.Options{
		Spec: spec, Worker: m.s.cfg.ID, HTTPClient: m.s.cfg.HTTPClient,
		Tools: m.tools, Closer: m.s.closer, Log: m.s.log,
		OnState:        m.s.kickHeartbeat,
		IdleTimeout:    m.s.cfg.SessionIdleTimeout,
		MaxResultBytes: m.s.cfg.MaxResultBytes,
		Sessions:       m.s.sessionRelay,
		AskTimeout:     m.s.cfg.CallTimeout,
		TaskIDs:        m.s.taskIDs,
	}
	if m.s.tune != nil {
		m.s.tune(&o)
	}
	u := upstream.New(o)
	sub, err := m.s.subscribePool(spec.Name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.wg.Go(func() { u.Run(ctx) })
	return &actor{u: u, cancel: cancel, sub: sub}, nil
}

// stopLocked stops intake for the actor and cancels it; its sessions close
// in the background. Calls still running on it fail as unavailable.
func (m *manager) stopLocked(a *actor) {
	_ = a.sub.Drain() // pending messages still get an answer (not served)
	a.cancel()
}

func (m *manager) publishLocked() {
	v := make(map[string]*upstream.Upstream, len(m.actors))
	for n, a := range m.actors {
		v[n] = a.u
	}
	m.view.Store(&v)
	m.s.kickHeartbeat()
}

// poolSubs returns the pool subscriptions (for draining at shutdown).
func (m *manager) poolSubs() []*nats.Subscription {
	m.mu.Lock()
	defer m.mu.Unlock()
	subs := make([]*nats.Subscription, 0, len(m.actors))
	for _, n := range slices.Sorted(maps.Keys(m.actors)) {
		subs = append(subs, m.actors[n].sub)
	}
	return subs
}

// wait waits for every actor goroutine (after the manager's ctx ended).
func (m *manager) wait() { m.wg.Wait() }

// sameSpec compares specs, treating empty and nil alike and a zero
// Processes as 1.
func sameSpec(a, b proto.UpstreamSpec) bool {
	norm := func(s proto.UpstreamSpec) proto.UpstreamSpec {
		if s.Processes <= 0 {
			s.Processes = 1
		}
		if len(s.Env) == 0 {
			s.Env = nil
		}
		if len(s.Command) == 0 {
			s.Command = nil
		}
		return s
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
