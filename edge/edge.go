package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/edge/internal/sessionstore"
	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
	"github.com/switchyard-mcp/switchyard/internal/limit"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/internal/publicurl"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Config configures an edge. The zero value of each field means its default.
type Config struct {
	// ID names this edge in session ids and subjects (a slug). Default: random.
	ID string
	// Listen is the HTTP address. Default 127.0.0.1:8080; port 0 picks one.
	Listen string
	// Tenancy is where tenants, API keys and policies are read on each
	// request. Nil: the edge watches the tenancy KV buckets itself
	// (tenancy.Watcher on its connection) and is not ready until they are
	// loaded.
	Tenancy tenancy.Source
	// Auth configures authentication beyond API keys: JWT issuers and the
	// protected resource metadata.
	Auth AuthConfig
	// TrustedProxies are the peers, besides loopback ones (always
	// trusted), whose X-Forwarded-Proto, X-Forwarded-Host,
	// X-Forwarded-Prefix and Forwarded headers say how clients reach the
	// edge (internal/publicurl), for the URLs and paths it hands out.
	// Auth.PublicURL, when set, wins. Nil: loopback peers only.
	TrustedProxies []netip.Prefix
	// AllowedOrigins are the browser origins the edge serves (with CORS
	// headers and preflights); a request with another Origin gets 403.
	// Nil: a loopback listener serves loopback origins, any other only
	// Auth.PublicURL's origin. A request without an Origin is served.
	AllowedOrigins *publicurl.Origins
	// CallTimeout bounds one call end to end. Default 60s.
	CallTimeout time.Duration
	// SessionTimeout closes client sessions idle this long. Default 30m; negative: never.
	SessionTimeout time.Duration
	// SessionEvictAfter drops from the edge's memory a 2025-era session
	// idle this long here (any edge adopts it again from its record on
	// its next request; evict.go): idle sessions then cost the edge
	// nothing. Default 2m; negative: never.
	SessionEvictAfter time.Duration
	// MaxRequestBodyBytes bounds one HTTP request body. Default 4 MiB.
	MaxRequestBodyBytes int64
	// MaxResultBytes bounds one reassembled result. Default 64 MiB.
	MaxResultBytes int64
	// ReadHeaderTimeout bounds the arrival of a request's header, from
	// the connection's first byte of it. Default 10s; negative: none.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the arrival of a request's body, from the start
	// of the request; a client that sends it slower is cut (conns.go).
	// Default 30s; negative: none.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write to a client: a response, or an
	// event of an SSE stream, that the client does not take within it
	// ends the connection. A stream that stays idle is not cut. Default
	// 30s; negative: none.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long. Default 120s; negative: none.
	IdleTimeout time.Duration
	// MaxConnections caps the edge's open client connections; one more
	// is answered 503 with Retry-After and closed. Default: three
	// quarters of the process's open-file limit, at most 16,384;
	// negative: none.
	MaxConnections int
	// MaxSessions caps the stateful client sessions the edge holds (and
	// is opening); one more initialize is answered 503 with Retry-After
	// (sessioncap.go). Default 10,000; negative: none.
	MaxSessions int
	// MaxTenantSessions caps one tenant's sessions on the edge; the
	// tenant's own limits.max_sessions (its share on this edge) applies
	// too, the lower winning. One more is answered 429, -32069
	// {"limit":"sessions"}. Default 10,000: a single tenant may fill an
	// edge at its default MaxSessions, but not one whose MaxSessions was
	// raised; lower it where tenants must not crowd each other out.
	// Negative: none.
	MaxTenantSessions int
	// JSONResponse answers POSTs with application/json instead of SSE.
	JSONResponse bool
	// ShutdownGrace bounds the HTTP shutdown. Default 5s.
	ShutdownGrace time.Duration
	// DrainDelay is how long a stopping edge keeps serving before it
	// closes its listener: /readyz answers 503 and every response closes
	// its connection meanwhile, so that a load balancer's health check
	// stops sending it requests before the listener goes (a request sent
	// on a connection the edge closes would fail at the client). Set it
	// to the balancer's check interval or more. Default 0: none.
	DrainDelay time.Duration
	// Metrics is where the edge registers its metrics
	// (internal/metrics.Edge and switchyard_edge_sessions_open). Nil: a
	// private registry nobody serves.
	Metrics prometheus.Registerer
	// Tracer makes the role's spans; nil: tracing off.
	Tracer *trace.Provider
	// Audit, if not nil, records one audit event per request on the audit
	// stream (docs/audit.md): the edge runs an audit.Publisher with it.
	// Nil: no audit trail.
	Audit *audit.Config
	// NameSeparator joins upstream and tool names in the federated view,
	// as the routers' (config name_separator); the audit trail records
	// names without the prefix. Default "__".
	NameSeparator string
	// RouteCacheTTL is how long the edge keeps a router's route grant for a
	// tool (proto.RouteGrant) and sends that tool's calls straight to a
	// worker; grants are also dropped whenever a router or the tenancy
	// snapshot says something changed. Default 1s; negative: off, every
	// call goes through a router.
	RouteCacheTTL time.Duration
	// TenantLabels, when positive, adds per-tenant request counts while
	// the tenancy state holds at most this many tenants
	// (metrics.EdgeOptions). 0: off.
	TenantLabels int
}

// Service is a running edge. Create it with [New]; call [Service.Run] once.
type Service struct {
	cfg      Config
	nc       *nats.Conn
	log      *slog.Logger
	sdkLog   *slog.Logger // the SDK's: its per-session info records demoted to debug
	caller   *bus.Caller
	grants   *routeCache // route grants: tools/call straight to a worker
	presence *bus.Presence
	routers  *bus.Routers // the live routers: each routed call goes to one by name
	tenancy  tenancy.Source
	watcher  *tenancy.Watcher    // nil when Config.Tenancy was given
	seed     *tenancy.SeedProbe  // with watcher: the store is seeded (not lost and being rebuilt)
	jwt      *jwtauth.Verifier   // nil without JWT issuers
	jwtCache jwtCache            // verified tokens, briefly (jwtcache.go)
	public   *publicurl.Resolver // how clients reach the edge, for the URLs it hands out
	fleet    *limit.Fleet        // the live edges, for each one's share of the limits
	limits   *limit.Limiter
	routes   sync.Map // tenant -> map[op]route subject
	// sseOwners binds legacy SSE sessions (their sessionid) to the view
	// and caller that opened them (ssebind.go).
	sseOwners sync.Map
	// resubPending is set while a resubscribe is scheduled
	// (resubscribe.go).
	resubPending atomic.Bool
	// workerGoneAt is when a worker last went or restarted (Unix ns).
	workerGoneAt atomic.Int64
	// placement is the last presence view's placement key
	// (placementKey); only the presence's goroutine reads and writes it.
	placement *string

	// passthrough is set while some catalog upstream takes the client's
	// Authorization header (proto.UpstreamAuth.ForwardsClientAuth: passthrough,
	// or a token exchange at the worker).
	passthrough atomic.Bool

	ready atomic.Bool
	// lastGap is when the NATS connection was last back after a gap
	// (Unix nanoseconds; 0: never).
	lastGap atomic.Int64
	// draining is set while a stopping edge waits out Config.DrainDelay.
	draining atomic.Bool
	addr     atomic.Pointer[string]

	sessions       sessionTable                       // stateful client sessions (fast path, idle timer)
	store          atomic.Pointer[sessionstore.Store] // the sessions every edge shares (adopt.go); nil until open
	adoptLocks     adoptLocks
	evicted        tombstones            // sessions evicted from memory, until their idle timeout (evict.go)
	bridged        suspensions           // 2026-era calls waiting for the client's input
	subs           listens               // upstream subscriptions of 2026-era listen streams
	events         *mcp.MemoryEventStore // SSE events kept for resumption (SEP-1699), SDK and fast path
	impl           *mcp.Implementation   // serverInfo of every view
	serverInfoMeta []byte                // `"<serverInfo key>":<impl>` for 2026-era results
	noFastPath     bool                  // tests: every request through the SDK
	met            *metrics.Edge
	audit          *audit.Publisher      // nil: no audit trail
	sdkAudits      sync.Map              // watchSDK's token -> *atomic.Bool: a handler recorded the request
	reg            prometheus.Registerer // where met went (private when Config.Metrics is nil): tests gather it
	tenantLabels   bool

	mu        sync.Mutex
	views     map[string]*view // guarded by mu: by viewKey(tenant, name)
	upstreams map[string]bool  // guarded by mu: the catalog's names -> passthrough
}

// New validates cfg and returns an edge. It does no I/O.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	if nc == nil {
		panic("edge: nil connection")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Components the edge owns name themselves: they get the logger
	// without the edge's component key (a JSON record must not carry a
	// key twice).
	base := log
	log = log.With(proto.LogComponent, "edge", proto.LogEdge, cfg.ID)
	s := &Service{cfg: cfg, nc: nc, log: log, sdkLog: slog.New(demoted{log.Handler()}), views: map[string]*view{}, upstreams: map[string]bool{}}
	s.impl = &mcp.Implementation{Name: "switchyard", Version: Version}
	info, err := json.Marshal(s.impl)
	if err != nil {
		return nil, err
	}
	key, _ := json.Marshal(mcp.MetaKeyServerInfo)
	s.serverInfoMeta = append(append(append([]byte(`"_meta":{`), key...), ':'), append(info, '}')...)
	reg := metrics.Or(cfg.Metrics)
	s.reg = reg
	if s.met, err = metrics.NewEdge(reg, metrics.EdgeOptions{TenantLabels: cfg.TenantLabels}); err != nil {
		return nil, fmt.Errorf("edge: metrics: %w", err)
	}
	if err := reg.Register(sessionCollector{&s.sessions}); err != nil {
		return nil, fmt.Errorf("edge: metrics: %w", err)
	}
	if err := reg.Register(listenCollector{&s.subs}); err != nil {
		return nil, fmt.Errorf("edge: metrics: %w", err)
	}
	s.tenantLabels = cfg.TenantLabels > 0
	if cfg.Audit != nil {
		if s.audit, err = audit.NewPublisher(nc, *cfg.Audit, base.With(proto.LogEdge, cfg.ID)); err != nil {
			return nil, fmt.Errorf("edge: audit: %w", err)
		}
		if err := reg.Register(audit.Collector(s.audit)); err != nil {
			return nil, fmt.Errorf("edge: metrics: %w", err)
		}
	}
	s.caller = bus.NewCaller(nc, int(cfg.MaxResultBytes))
	s.grants = newRouteCache(cfg.RouteCacheTTL)
	s.events = mcp.NewMemoryEventStore(nil)
	s.presence = bus.NewPresence(nc, log)
	s.routers = bus.NewRouters(nc)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("edge: jetstream: %w", err)
	}
	if s.fleet, err = limit.NewFleet(js, limit.FleetConfig{ID: cfg.ID}, base); err != nil {
		return nil, err
	}
	if s.limits, err = limit.New(limit.Config{Fleet: s.fleet}); err != nil {
		return nil, err
	}
	s.tenancy = cfg.Tenancy
	if s.tenancy == nil {
		if s.watcher, err = tenancy.NewWatcher(js, tenancy.WatcherConfig{OnChange: func(*tenancy.Snapshot) { s.grants.dropAll() }}, base.With(proto.LogEdge, cfg.ID)); err != nil {
			return nil, err
		}
		s.tenancy = s.watcher
		s.seed = tenancy.NewSeedProbe(js, time.Second)
		s.seed.OnReseed = s.restoreRecords
	}
	if cfg.Auth.JWT != nil {
		if err := cfg.Auth.JWT.Validate(); err != nil {
			return nil, fmt.Errorf("edge: auth: %w", err)
		}
	}
	var pub *publicurl.Origin
	if cfg.Auth.PublicURL != "" {
		o, err := publicurl.ParsePublicURL(cfg.Auth.PublicURL)
		if err != nil {
			return nil, fmt.Errorf("edge: auth: public URL %q: %w", cfg.Auth.PublicURL, err)
		}
		pub = &o
	}
	s.public = publicurl.NewResolver(pub, cfg.TrustedProxies, cfg.Listen)
	return s, nil
}

func (c *Config) fill() error {
	if c.ID == "" {
		c.ID = bus.NewID("edge")
	}
	if !proto.ValidSlug(c.ID) {
		return fmt.Errorf("edge: id %q is not a slug", c.ID)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.NameSeparator == "" {
		c.NameSeparator = "__"
	}
	if c.RouteCacheTTL == 0 {
		c.RouteCacheTTL = defaultRouteCacheTTL
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 60 * time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 30 * time.Minute
	}
	if c.SessionEvictAfter == 0 {
		c.SessionEvictAfter = 2 * time.Minute
	}
	if c.MaxRequestBodyBytes == 0 {
		c.MaxRequestBodyBytes = 4 << 20
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = 64 << 20
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.ReadHeaderTimeout, 10 * time.Second}, {&c.ReadTimeout, 30 * time.Second},
		{&c.WriteTimeout, 30 * time.Second}, {&c.IdleTimeout, 120 * time.Second}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = defaultMaxConnections()
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxTenantSessions == 0 {
		c.MaxTenantSessions = DefaultMaxTenantSessions
	}
	if c.CallTimeout < 0 || c.MaxRequestBodyBytes < 0 || c.MaxResultBytes < 0 {
		return errors.New("edge: call timeout and size limits must not be negative")
	}
	return nil
}

// The edge's default session caps (Config.MaxSessions, MaxTenantSessions).
const (
	DefaultMaxSessions       = 10000
	DefaultMaxTenantSessions = 10000
)

// orNone is d, or 0 (net/http's "none") for a negative d.
func orNone(d time.Duration) time.Duration { return max(d, 0) }

// Ready reports whether the edge is listening, has loaded the catalog and
// the tenancy state, and is connected to NATS.
func (s *Service) Ready() bool {
	return s.ready.Load() && s.nc.IsConnected() && (s.watcher == nil || (s.watcher.Ready() && s.seed.Seeded())) && s.fleet.Ready() && s.store.Load() != nil
}

// Addr is the address the edge listens on, once Run has bound it ("" before).
func (s *Service) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// Run listens and serves until parent ends, then drains (Config.DrainDelay:
// not ready, still serving), shuts the HTTP server down (bounded by
// ShutdownGrace), fails calls still waiting, and stops its own work.
func (s *Service) Run(parent context.Context) error {
	// The edge's own work (presence, routers, stores, watchers) outlives
	// parent: it goes on while the edge drains and finishes the requests
	// it has, and stops after them.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	if err := s.start(); err != nil {
		return err
	}
	if s.cfg.Auth.JWT != nil {
		jc := *s.cfg.Auth.JWT
		if jc.Logger == nil {
			jc.Logger = s.log
		}
		v, err := jwtauth.New(ctx, jc)
		if err != nil {
			return fmt.Errorf("edge: auth: %w", err)
		}
		defer v.Close()
		s.jwt = v
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("edge: listen: %w", err)
	}
	addr := ln.Addr().String()
	s.addr.Store(&addr)
	svc, err := s.startMicro()
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("edge: micro service: %w", err)
	}
	if s.cfg.MaxConnections > 0 {
		ln = &capListener{Listener: ln, max: int64(s.cfg.MaxConnections), refused: func() { s.met.Limited("edge_connections") }}
	}
	srv := &http.Server{
		Handler:           s.closeWhileDraining(withDeadlines(s.handler(), orNone(s.cfg.ReadTimeout), orNone(s.cfg.WriteTimeout))),
		ReadHeaderTimeout: orNone(s.cfg.ReadHeaderTimeout),
		IdleTimeout:       s.cfg.IdleTimeout, // negative: none (net/http)
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("edge: jetstream: %w", err)
	}
	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	run(func() { _ = s.presence.Run(ctx) })
	run(func() { _ = s.routers.Run(ctx) })
	run(func() { s.grants.dropOnReconnect(ctx, s.nc) })
	run(func() { s.recheckOnReconnect(ctx) })
	run(func() { s.sweepStuck(ctx) })
	run(func() { _ = bus.Watch(ctx, js, proto.BucketUpstreams, s.onUpstream) })
	run(func() { s.runSessionStore(ctx, js) })
	run(func() { s.runEvictor(ctx) })
	if s.watcher != nil {
		run(func() { _ = s.watcher.Run(ctx) })
		run(func() { s.seed.Run(ctx) })
	}
	// The fleet leaves (its key deleted, so the others take over this
	// edge's share) only after the HTTP server has finished its calls.
	run(func() { _ = s.fleet.Run(ctx) })
	run(func() { s.sweepLimits(ctx) })
	// The audit publisher outlives the HTTP server: the requests it
	// finishes during shutdown are recorded, then flushed.
	actx, acancel := context.WithCancel(context.WithoutCancel(ctx))
	defer acancel()
	auditDone := make(chan struct{})
	if s.audit != nil {
		go func() { defer close(auditDone); _ = s.audit.Run(actx) }()
	} else {
		close(auditDone)
	}
	serveErr := make(chan error, 1)
	run(func() { serveErr <- srv.Serve(ln) })
	s.log.Info("edge listening", "addr", addr)
	s.warnAdvertised(addr)
	select {
	case <-parent.Done():
	case err = <-serveErr:
	}
	s.ready.Store(false)
	if s.cfg.DrainDelay > 0 && err == nil {
		s.draining.Store(true)
		s.log.Info("edge draining", "for", s.cfg.DrainDelay)
		time.Sleep(s.cfg.DrainDelay)
	}
	_ = svc.Stop()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	if srv.Shutdown(sctx) != nil {
		_ = srv.Close() // SSE streams outlived the grace
	}
	scancel()
	s.caller.Stop(proto.Errorf(proto.CodeUnavailable, "edge shutting down"))
	cancel()
	wg.Wait()
	acancel()
	<-auditDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// closeWhileDraining makes every response close its connection while the
// edge drains (Config.DrainDelay): a balancer then opens a new one, to an
// edge that is ready.
func (s *Service) closeWhileDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// routerGoneGrace is how long after a router's departure the edge fails
// the calls it held unplaced: long enough for the notes it sent before
// leaving to be read.
const routerGoneGrace = 200 * time.Millisecond

// workerByeGrace bounds how long after a worker's Bye the edge waits for
// its inbox to catch up before settling the calls still waiting on it.
const workerByeGrace = 500 * time.Millisecond

// errWorkerLost fails the calls of a worker that went away. It names no
// worker: a worker's id is an operator's name for a host (the edge logs
// it when the worker leaves).
var errWorkerLost = &proto.Error{Code: proto.CodeWorkerLost, Msg: "the worker serving the call went away"}

func (s *Service) start() error {
	s.caller.Gone = s.presence.Gone
	s.presence.OnReconnect = func(w string) { go s.recheckWorker(context.Background(), w) }
	s.presence.OnChange = s.onPlacementChange
	s.presence.OnGone = func(w string) {
		s.workerGoneAt.Store(time.Now().UnixNano())
		s.grants.dropAll()
		if s.presence.SaidBye(w) {
			// It answered every call it took before its Bye, and NATS
			// keeps its messages in order to this connection: once the
			// inbox has handled what it held at the Bye, a call still
			// waiting never reached the worker (it came as the worker
			// left), and is placed again. If this connection or the
			// worker's had a gap since it was sent, or the inbox does not
			// catch up, its reply may be what was lost: it fails, "may
			// have run".
			var waiting []*bus.Call
			for _, k := range s.caller.Pending() {
				if k.Worker() == w {
					waiting = append(waiting, k)
				}
			}
			if len(waiting) > 0 {
				go func() {
					caught := s.caller.CatchUp(workerByeGrace) && s.nc.IsConnected()
					// The last gap of this connection, and of the worker's,
					// as seen here (no earlier than it ended).
					gap := time.Unix(0, s.lastGap.Load())
					if t := s.presence.ReconnectedAt(w); t.After(gap) {
						gap = t
					}
					for _, k := range waiting {
						switch {
						case k.Done():
						case caught && gap.Before(k.Born()):
							// No gap since it was sent: never taken.
							k.Fail(errLostOnTheWay)
						default:
							k.Fail(errWorkerLost)
						}
					}
				}()
			}
			return
		}
		s.log.Info("worker gone; its calls fail", proto.LogWorker, w)
		s.caller.FailWorker(w, errWorkerLost)
	}
	if err := s.caller.Start(); err != nil {
		return fmt.Errorf("edge: inbox: %w", err)
	}
	if err := s.presence.Start(); err != nil {
		return fmt.Errorf("edge: presence: %w", err)
	}
	// A router that goes (its Bye, missed heartbeats, or no responder on
	// its subject and no heartbeat within bus.SuspectGrace) costs only the
	// calls it held and had not placed.
	s.routers.OnGone = func(r string, said bool) {
		// A router that said Bye (after placing all it had) ran nothing of
		// what it still holds: those calls go to another router
		// (roundTrip's attempts). One that only went silent, or lost its
		// subscription and did not come back, may be late, not dead, and
		// place them yet: they fail, retryable by the client, never sent
		// twice by the edge.
		err := bus.ErrRouterLost
		if !said {
			err = bus.ErrRouterSilent
		}
		s.log.Info("router gone; its unplaced calls fail or go to another", "router", r, "said", said)
		// After a moment: the placement notes the router sent before its
		// Bye arrive on another subscription, maybe after it.
		time.AfterFunc(routerGoneGrace, func() { s.caller.FailRouter(r, err) })
	}
	s.caller.RouterMissing = s.routers.Suspect
	if err := s.routers.Start(); err != nil {
		return fmt.Errorf("edge: routers: %w", err)
	}
	// Every subscription is guarded (bus.Guard): a message a JetStream
	// consumer delivers there keeps its stored subject and is dropped.
	if _, err := s.nc.Subscribe(proto.SubjEvtRoutes, bus.Guard(proto.SubjEvtRoutes, func(*nats.Msg) { s.grants.dropAll() })); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	if _, err := s.nc.Subscribe(proto.SubjEvtListChangedAll, bus.Guard(proto.SubjEvtListChangedAll, s.onListChanged)); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	// Every edge's: a session's messages go to its origin's subject, and
	// the edge holding the session's stream delivers them (onSessionMsg).
	if _, err := s.nc.Subscribe(proto.SubjEdgeMsgAll, bus.Guard(proto.SubjEdgeMsgAll, s.onSessionMsg)); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	answers, err := proto.EdgeAnswerSubject(s.cfg.ID)
	if err != nil {
		return err
	}
	if _, err := s.nc.Subscribe(answers, bus.Guard(answers, s.onForwardedAnswer)); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	resumes, err := proto.EdgeResumeSubject(s.cfg.ID)
	if err != nil {
		return err
	}
	if _, err := s.nc.Subscribe(resumes, bus.Guard(resumes, s.onResume)); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	if _, err := s.nc.Subscribe(proto.SubjEvtSessionLevelAll, bus.Guard(proto.SubjEvtSessionLevelAll, s.onSessionLevel)); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	if _, err := s.nc.Subscribe(proto.SubjEvtSessionCancelAll, bus.Guard(proto.SubjEvtSessionCancelAll, s.onSessionCancel)); err != nil {
		return fmt.Errorf("edge: subscribe: %w", err)
	}
	return nil
}

func (s *Service) onUpstream(ev *bus.KVEvent, initial bool) {
	if initial {
		s.ready.Store(true)
		return
	}
	pass := false
	if !ev.Deleted {
		var spec proto.UpstreamSpec
		if err := proto.Unmarshal(ev.Value, &spec); err != nil {
			s.log.Warn("bad upstream spec", proto.LogUpstream, ev.Key, proto.LogErr, err)
		}
		pass = spec.Auth.ForwardsClientAuth()
	}
	s.mu.Lock()
	if ev.Deleted {
		delete(s.upstreams, ev.Key)
	} else {
		s.upstreams[ev.Key] = pass
	}
	any := false
	for _, p := range s.upstreams {
		any = any || p
	}
	s.mu.Unlock()
	s.passthrough.Store(any)
}

// routeFor returns the route subject of op for tenant
// (switchyard.v1.route.<tenant>.<op>), built once per tenant.
func (s *Service) routeFor(tenant, op string) string {
	if c, ok := s.routes.Load(tenant); ok {
		return c.(map[string]string)[op]
	}
	subs := map[string]string{}
	for _, o := range proto.ForwardedOps() {
		b, err := proto.AppendRouteSubject(nil, tenant, o)
		if err != nil {
			// Tenant names are slugs (tenancy.CheckTenant): unreachable.
			panic(fmt.Sprintf("edge: route subject of tenant %q: %v", tenant, err))
		}
		subs[o] = string(b)
	}
	c, _ := s.routes.LoadOrStore(tenant, subs)
	return c.(map[string]string)[op]
}

// onListChanged tells the sessions of the tenant's views that a list
// changed. Route grants are dropped first: a router publishes
// switchyard.v1.evt.routes before its list_changed events, but the edge
// handles the two subjects on different goroutines, and a client told
// that a tool is gone must not reach it on an old grant.
func (s *Service) onListChanged(m *nats.Msg) {
	s.grants.dropAll()
	var tc proto.ListChanged
	if err := proto.Unmarshal(m.Data, &tc); err != nil {
		s.log.Warn("bad list_changed event", proto.LogErr, err)
		return
	}
	kind := tc.Kind
	if kind == "" {
		kind = proto.KindTools
	}
	s.mu.Lock()
	vs := []*view{s.views[viewKey(tc.Tenant, "")]}
	for _, u := range tc.Upstreams {
		vs = append(vs, s.views[viewKey(tc.Tenant, u)])
	}
	s.mu.Unlock()
	for _, v := range vs {
		if v != nil {
			v.listChanged(kind)
		}
	}
}

// serveReady answers /readyz: 200 while the edge serves, 503 before and
// after. A stale tenancy snapshot (KV unreachable: the last good one keeps
// serving) is reported in the body, not as a failure, so a KV outage does
// not take every edge out of its load balancer.
func (s *Service) serveReady(w http.ResponseWriter, _ *http.Request) {
	if !s.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	msg := "ready\n"
	if s.watcher != nil {
		if stale, since, reason := s.watcher.Stale(); stale {
			msg += "tenancy: stale since " + since.UTC().Format(time.RFC3339) + ": " + reason + "\n"
		}
	}
	if stale, since, reason := s.fleet.Stale(); stale {
		msg += "limits fleet: stale since " + since.UTC().Format(time.RFC3339) + ": " + reason + "\n"
	}
	_, _ = w.Write([]byte(msg))
}

// sweepLimits frees the limiter's idle per-principal state once a minute.
func (s *Service) sweepLimits(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.limits.Sweep()
		}
	}
}
