package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/grant"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// DefaultTenant is the tenant of a configuration without tenants
// (config.DefaultTenant): anonymous, every upstream, default allow.
const DefaultTenant = config.DefaultTenant

// Config configures a router. The zero value of each field means its default.
type Config struct {
	// ID names this router in logs. Default: random.
	ID string
	// PageSize is the number of tools per tools/list page. Default 100.
	PageSize int
	// NameSeparator joins upstream and tool names. Default "__".
	NameSeparator string
	// Subscriptions is how many queue subscriptions share the intake, each
	// with its own delivery goroutine. Default 2.
	Subscriptions int
	// Tenancy is where the router reads tenants and their policies, once
	// per request. Nil: the router watches the tenancy buckets itself
	// (tenancy.Watcher on its connection, run by Run; Ready waits for its
	// first load). A Source given here is polled for a new snapshot every
	// TenancyPoll, to announce what changed (see the package doc).
	Tenancy tenancy.Source
	// TenancyPoll is how often a Tenancy source given in the Config is
	// checked for a new snapshot. Default 250ms.
	TenancyPoll time.Duration
	// ViewCacheBytes bounds the memory of the tenants' filtered,
	// pre-rendered lists (least recently used out first). Default 64 MiB.
	ViewCacheBytes int
	// Metrics is where the router registers its metrics
	// (internal/metrics.Router). Nil: a private registry nobody serves.
	Metrics prometheus.Registerer
	// Tracer makes the role's spans; nil: tracing off.
	Tracer *trace.Provider
	// GrantValidity is how long a route grant's token (its MAC: internal/
	// grant) lets an edge call a worker directly: at least the edges'
	// route cache TTL, plus slack for clocks that differ between hosts.
	// A revoked grant is dropped by honest edges at once; this bounds
	// what a stolen one buys. Default DefaultGrantValidity.
	GrantValidity time.Duration
}

// DefaultGrantValidity is Config.GrantValidity's default: the edges'
// default route cache TTL (1s) and 5s of clock skew; MaxGrantValidity
// caps it (the longest route cache TTL, a minute, and the skew).
const (
	DefaultGrantValidity = 6 * time.Second
	MaxGrantValidity     = 65 * time.Second
)

// Service is a running router. Create it with [New]; [Service.Run] once.
type Service struct {
	cfg      Config
	nc       *nats.Conn
	log      *slog.Logger
	presence *bus.Presence

	fwdPrefix string // reply prefix of forwarded calls: <inbox>.f.<worker>.<edge reply>
	// grantKey signs route grants (proto.KeyGrants); nil until Run has
	// read it: no grants are made before.
	grantKey atomic.Pointer[grant.Key]
	// draining is set when the router stops: its heartbeats say so.
	draining atomic.Bool
	// beatNow asks the heartbeat loop to publish at once.
	beatNow chan struct{}

	tenancy tenancy.Source
	watcher *tenancy.Watcher   // nil when Config.Tenancy was given
	seed    *tenancy.SeedProbe // with watcher: the store is seeded
	views   *viewCache
	kick    chan struct{} // wakes the announcer; capacity 1

	met *metrics.Router

	snap  atomic.Pointer[catalog.Snapshot]
	ready atomic.Bool
	live  atomic.Bool // the intake subscriptions are in place
	// intake are the route queue subscriptions while Run serves (nil
	// before and after): their pending count is the router's mailbox.
	intake atomic.Pointer[[]*nats.Subscription]
	// handling counts the calls onCall is handling (heartbeat's Backlog).
	handling atomic.Int32
	rr       atomic.Uint64

	mu      sync.Mutex // guards state and the loaded flags
	state   *catalog.State
	loadedU bool // catalog watch delivered its current values
	loadedT bool // list-set watch delivered its current values

	// Owned by the announcer goroutine: the catalog and tenancy snapshots
	// whose lists were last announced.
	annCat *catalog.Snapshot
	annTen *tenancy.Snapshot
}

// New validates cfg and returns a router. It does no I/O.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	if nc == nil {
		panic("router: nil connection")
	}
	if cfg.ID == "" {
		cfg.ID = bus.NewID("router")
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 100
	}
	if cfg.NameSeparator == "" {
		cfg.NameSeparator = "__"
	}
	if cfg.Subscriptions == 0 {
		cfg.Subscriptions = 2
	}
	if cfg.GrantValidity <= 0 {
		cfg.GrantValidity = DefaultGrantValidity
	}
	cfg.GrantValidity = min(cfg.GrantValidity, MaxGrantValidity)
	if cfg.TenancyPoll == 0 {
		cfg.TenancyPoll = 250 * time.Millisecond
	}
	if cfg.ViewCacheBytes == 0 {
		cfg.ViewCacheBytes = 64 << 20
	}
	if cfg.PageSize < 0 || cfg.Subscriptions < 0 || cfg.TenancyPoll < 0 || cfg.ViewCacheBytes < 0 {
		return nil, errors.New("router: page size, subscriptions, tenancy poll and view cache bytes must be positive")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := log.With("router_id", cfg.ID) // for components that name themselves
	log = base.With(proto.LogComponent, "router")
	s := &Service{cfg: cfg, nc: nc, log: log, beatNow: make(chan struct{}), state: catalog.NewState(cfg.NameSeparator),
		tenancy: cfg.Tenancy, views: newViewCache(cfg.PageSize, cfg.ViewCacheBytes), kick: make(chan struct{}, 1)}
	reg := metrics.Or(cfg.Metrics)
	met, err := metrics.NewRouter(reg)
	if err != nil {
		return nil, fmt.Errorf("router: metrics: %w", err)
	}
	s.met = met
	s.views.lookup = met.ListCache
	if err := reg.Register(intakeCollector{s}); err != nil {
		return nil, fmt.Errorf("router: metrics: %w", err)
	}
	if s.tenancy == nil {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("router: jetstream: %w", err)
		}
		w, err := tenancy.NewWatcher(js, tenancy.WatcherConfig{TenantsOnly: true, OnChange: func(*tenancy.Snapshot) { s.wake() }}, base)
		if err != nil {
			return nil, fmt.Errorf("router: tenancy: %w", err)
		}
		s.tenancy, s.watcher = w, w
		s.seed = tenancy.NewSeedProbe(js, time.Second)
	}
	s.presence = bus.NewPresence(nc, log)
	s.snap.Store(s.state.Build(func(string) bool { return false }))
	return s, nil
}

// MicroService is the name of every router's NATS micro service (its
// metadata "id" is the router's id).
const MicroService = proto.ServiceRouter

// Checks reports the router's readiness check by check (internal/admin):
// the NATS connection, its intake subscriptions, the upstream catalog and
// list sets loaded, the tenancy snapshot (stale: a warning, the last good
// one keeps serving) and whether any worker is live (none: a warning;
// calls then fail with -32060 while lists are still answered).
func (s *Service) Checks() []admin.Check {
	s.mu.Lock()
	loadedU, loadedT := s.loadedU, s.loadedT
	s.mu.Unlock()
	cs := []admin.Check{
		admin.OK("nats", s.nc.IsConnected(), "not connected"),
		admin.OK("subscriptions", s.live.Load(), "intake not subscribed"),
		admin.OK("catalog", loadedU, "upstream catalog not loaded"),
		admin.OK("lists", loadedT, "list sets not loaded"),
	}
	if s.watcher != nil {
		cs = append(cs, admin.OK("store_seeded", s.seed.Seeded(), "tenancy-svc has not seeded the NATS store (a store lost and being rebuilt)"))
		c := admin.OK("tenancy", s.watcher.Ready(), "tenancy snapshot not loaded")
		if stale, since, reason := s.watcher.Stale(); stale && c.Status == admin.StatusOK {
			c = admin.Check{Name: "tenancy", Status: admin.StatusWarn, Detail: "stale since " + since.UTC().Format(time.RFC3339) + ": " + reason}
		}
		cs = append(cs, c)
	}
	w := admin.Check{Name: "workers", Status: admin.StatusOK}
	if len(s.presence.View().Workers) == 0 {
		w = admin.Check{Name: "workers", Status: admin.StatusWarn, Detail: "no live worker"}
	}
	return append(cs, w)
}

// Ready reports whether the router has loaded the catalog (and, when it
// watches the tenancy buckets itself, the tenants) and is consuming calls.
func (s *Service) Ready() bool {
	return s.live.Load() && s.loaded()
}

// loaded reports whether the catalog, the lists and (when the router
// watches them itself) the tenants are loaded, and the store they come
// from is seeded (not lost and being rebuilt: tenancy.SeedProbe).
func (s *Service) loaded() bool {
	return s.ready.Load() && (s.watcher == nil || (s.watcher.Ready() && s.seed.Seeded()))
}

// presenceWarmup is how long a starting router waits, at most, for the
// workers' answers to its presence query before it takes calls (they
// come within milliseconds; a deployment without workers yet waits this
// long once).
const presenceWarmup = 300 * time.Millisecond

// awaitLoaded waits until the router is loaded and, until warm or the
// first worker heard, for the workers' answers to the presence query. It
// reports false when ctx ended first.
func (s *Service) awaitLoaded(ctx context.Context, warm time.Time) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	logged := false
	since := time.Now()
	for {
		if s.loaded() && (time.Now().After(warm) || len(s.presence.View().Workers) > 0) {
			return true
		}
		if !logged && time.Since(since) > 5*time.Second {
			s.log.Info("router waiting for the catalog, lists and tenants before taking calls")
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// Run subscribes and serves until ctx ends, then drains its subscriptions.
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("router: jetstream: %w", err)
	}
	s.presence.OnChange = func(*bus.View) { s.rebuild() }
	if err := s.presence.Start(); err != nil {
		return fmt.Errorf("router: presence: %w", err)
	}
	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	run(func() { _ = s.presence.Run(ctx) })
	run(func() { _ = bus.Watch(ctx, js, proto.BucketUpstreams, s.onUpstream) })
	run(func() { _ = bus.Watch(ctx, js, proto.BucketLists, s.onListSet) })
	if s.watcher != nil {
		run(func() { _ = s.watcher.Run(ctx) })
		run(func() { s.seed.Run(ctx) })
	}
	run(func() { s.announcer(ctx) })
	run(func() { s.loadGrantKey(ctx, js) })
	// Calls are taken only once they can be answered right: the catalog,
	// the lists and the tenants loaded, and the workers heard (they
	// answer the presence query within milliseconds). A router that
	// subscribed first answered "unknown tool" and "tenant not available"
	// to the calls it took meanwhile.
	if !s.awaitLoaded(ctx, time.Now().Add(presenceWarmup)) {
		cancel()
		wg.Wait()
		return nil
	}
	s.fwdPrefix = s.nc.NewInbox() + ".f."
	// Guarded (bus.Guard): a message a JetStream consumer delivers to a
	// subscription keeps its stored subject and is dropped.
	undelivered, err := s.nc.Subscribe(s.fwdPrefix+">", bus.Guard(s.fwdPrefix+">", s.onUndelivered))
	if err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("router: subscribe: %w", err)
	}
	subs := []*nats.Subscription{undelivered}
	for range s.cfg.Subscriptions {
		sub, err := s.nc.QueueSubscribe(proto.SubjRouteAll, proto.QueueRouter, bus.Guard(proto.SubjRouteAll, s.onCall))
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("router: subscribe: %w", err)
		}
		_ = sub.SetPendingLimits(-1, 256<<20)
		subs = append(subs, sub)
	}
	// Calls sent to this router by name (an edge that knows the live
	// routers picks one: it knows then which router holds each call, and
	// sends the calls of a router that died to another).
	own := proto.RouterRouteSubjects(s.cfg.ID)
	direct, err := s.nc.Subscribe(own, bus.Guard(own, s.onCall))
	if err != nil {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		cancel()
		wg.Wait()
		return fmt.Errorf("router: subscribe: %w", err)
	}
	_ = direct.SetPendingLimits(-1, 256<<20)
	subs = append(subs, direct)
	intake := subs[1:]
	s.intake.Store(&intake)
	defer s.intake.Store(nil)
	// Ready once the server has the subscriptions.
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn("router: flush failed", proto.LogErr, err)
	}
	s.live.Store(true)
	svc, err := admin.AddService(s.nc, admin.ServiceConfig{
		Name: MicroService, ID: s.cfg.ID, Version: metrics.Version(),
		Description: "Switchyard router: federated lists, policy and placement",
	})
	if err != nil {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		cancel()
		wg.Wait()
		return fmt.Errorf("router: micro service: %w", err)
	}
	s.log.Info("router running")
	bctx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	beats := make(chan struct{})
	go func() { defer close(beats); s.heartbeat(bctx) }()
	<-ctx.Done()
	s.ready.Store(false)
	_ = svc.Stop()
	s.live.Store(false)
	s.draining.Store(true)
	s.beat() // draining: edges send nothing new here
	// Drain: the server delivers nothing more, and the calls already
	// delivered are placed (their notes go out). Only then the Bye: an
	// edge that hears it fails the calls this router has not placed, and
	// sends them to another router; none of them may still run here.
	for _, sub := range subs {
		_ = sub.Drain()
	}
	drained := time.Now().Add(drainWait)
	for _, sub := range subs {
		for sub.IsValid() && time.Now().Before(drained) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	stopBeats()
	<-beats
	cancel()
	wg.Wait()
	return nil
}

// loadGrantKey reads the fleet's grant key, waiting until tenancy-svc has
// provisioned it; until then the router makes no route grants.
func (s *Service) loadGrantKey(ctx context.Context, js jetstream.JetStream) {
	b, err := bus.Secret(ctx, js, proto.KeyGrants, s.log)
	if err != nil {
		return // ctx ended
	}
	k, err := grant.NewKey(b)
	if err != nil {
		clear(b)
		s.log.Error("route grant key unusable: no route grants", proto.LogErr, err)
		return
	}
	s.grantKey.Store(k)
	// It changes when tenancy-svc makes it again (the NATS store was
	// lost): the router follows, as the workers do.
	bus.FollowSecret(ctx, js, proto.KeyGrants, b, bus.SecretFollowInterval, func(nb []byte) {
		k, err := grant.NewKey(nb)
		clear(nb)
		if err != nil {
			s.log.Error("new route grant key unusable; keeping the old", proto.LogErr, err)
			return
		}
		s.grantKey.Store(k)
		s.log.Warn("the fleet's route grant key changed; signing with the new one")
	})
	clear(b)
}

func (s *Service) onUpstream(ev *bus.KVEvent, initial bool) {
	s.mu.Lock()
	if initial {
		s.loadedU = true
	} else {
		s.state.SetUpstream(ev.Key, !ev.Deleted)
		if !ev.Deleted {
			s.state.SetPassthrough(ev.Key, s.passthroughOf(ev))
		}
	}
	s.mu.Unlock()
	s.rebuild()
}

func (s *Service) onListSet(ev *bus.KVEvent, initial bool) {
	s.mu.Lock()
	var upstream, kind string
	ok := false
	if !initial {
		upstream, kind, ok = proto.ParseListKey(ev.Key)
	}
	switch {
	case initial:
		s.loadedT = true
	case !ok:
		s.log.Warn("bad list key", proto.LogUpstream, ev.Key)
	case ev.Deleted:
		_ = s.state.SetList(kind, upstream, nil)
		s.state.SetHints(kind, upstream, catalog.Hints{})
	default:
		var ls proto.ListSet
		if err := proto.Unmarshal(ev.Value, &ls); err != nil {
			s.log.Warn("bad list set", proto.LogUpstream, ev.Key, proto.LogErr, err)
			break
		}
		items := ls.Items
		if items == nil {
			items = [][]byte{} // an empty set, not a removal
		}
		if err := s.state.SetList(kind, upstream, items); err != nil {
			s.log.Warn("list items skipped", proto.LogUpstream, ev.Key, proto.LogErr, err)
		}
		s.state.SetHints(kind, upstream, catalog.Hints{TTLMs: ls.TTLMs, Scope: ls.CacheScope, Notified: ls.Notified})
	}
	s.mu.Unlock()
	s.rebuild()
}

// passthroughOf reports whether an upstream spec asks for the client's
// Authorization on its calls. A spec that does not decode is logged and
// gets no passthrough: the client's credentials are kept back rather
// than sent where nobody asked for them.
func (s *Service) passthroughOf(ev *bus.KVEvent) bool {
	var spec proto.UpstreamSpec
	if err := proto.Unmarshal(ev.Value, &spec); err != nil {
		s.log.Warn("bad upstream spec", proto.LogUpstream, ev.Key, proto.LogErr, err)
		return false
	}
	return spec.Auth.ForwardsClientAuth()
}

// rebuild makes a new snapshot, publishes it, and has the announcer tell
// the tenants what changed.
func (s *Service) rebuild() {
	s.mu.Lock()
	// The presence view is read under mu: two rebuilds racing (a catalog
	// event and a presence change) would otherwise let the one that read
	// the older view store its snapshot last, and keep it until the next
	// change.
	view := s.presence.View()
	next := s.state.Build(view.Up)
	s.snap.Store(next)
	// ready is stored under mu too: a rebuild that began before the
	// catalog finished loading must not overwrite a later rebuild's true.
	ready := s.loadedU && s.loadedT
	s.ready.Store(ready)
	s.mu.Unlock()
	if ready {
		s.wake()
	}
}

// deadlinePassed reports whether the edge has stopped waiting.
func deadlinePassed(req *proto.Request) bool {
	return req.DeadlineUnixMs != 0 && time.Now().UnixMilli() >= req.DeadlineUnixMs
}
