package worker

import (
	"context"
	"errors"
	"fmt"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/grant"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/specwatch"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/toolstore"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/upstream"
)

// Defaults for [Config].
const (
	DefaultHeartbeatInterval  = 500 * time.Millisecond
	DefaultCallTimeout        = 60 * time.Second
	DefaultShutdownGrace      = 5 * time.Second
	DefaultMaxInFlight        = 1024
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultMaxResultBytes     = 64 << 20
	// DefaultMaxIdleConnsPerHost is set on the default HTTP transport: every
	// streamable call is its own POST. The transport's total bound
	// (MaxIdleConns, 100 in http.DefaultTransport) is lifted, or it would
	// close connections beyond 100 after each call under more concurrent
	// calls than that.
	DefaultMaxIdleConnsPerHost = 256
)

// Config configures a worker. The zero value of each optional field means
// its default.
type Config struct {
	// ID names the worker in subjects and heartbeats: a slug ([a-z0-9-]).
	// Required.
	ID string
	// Upstreams lists the upstream names this worker serves; empty means
	// every upstream in the catalog.
	Upstreams []string
	// HeartbeatInterval is how often the worker publishes its presence.
	// Default 500ms.
	HeartbeatInterval time.Duration
	// CallTimeout bounds one call when neither the request's deadline nor
	// the upstream's call_timeout is shorter. Default 60s.
	CallTimeout time.Duration
	// ShutdownGrace bounds how long Run waits, after ctx ends, for in-flight
	// calls (they are then cancelled) and again for upstream sessions to
	// close (they are then killed). Default 5s.
	ShutdownGrace time.Duration
	// MaxInFlight bounds concurrent calls; beyond it a call is answered
	// proto.CodeOverloaded at once. Default 1024.
	MaxInFlight int
	// HTTPClient is used for HTTP upstreams; its Transport is shared by all
	// upstream sessions (its Timeout is ignored: streams are long-lived).
	// Default: a clone of http.DefaultTransport with MaxIdleConnsPerHost 256
	// and no total MaxIdleConns bound.
	HTTPClient *http.Client
	// SessionIdleTimeout closes an upstream session dedicated to one client
	// session after this long without a call. Default 30m.
	SessionIdleTimeout time.Duration
	// MaxResultBytes bounds one upstream response message the worker
	// buffers to capture a raw result (and one legacy-SSE event); a bigger
	// result fails the call as unavailable. Default 64 MiB.
	MaxResultBytes int
	// Metrics is where the worker registers its metrics
	// (internal/metrics.Worker and the upstream pool gauges). Nil: a
	// private registry nobody serves.
	Metrics prometheus.Registerer
	// Tracer makes the role's spans; nil: tracing off.
	Tracer *trace.Provider
}

// Validate reports every problem in c, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("worker: "+format, a...)) }
	if !proto.ValidSlug(c.ID) {
		bad("id %q is not a slug ([a-z0-9-], 1-63 characters)", c.ID)
	}
	seen := map[string]bool{}
	for _, u := range c.Upstreams {
		if !proto.ValidSlug(u) {
			bad("upstreams: %q is not a slug", u)
		}
		if seen[u] {
			bad("upstreams: %q listed twice", u)
		}
		seen[u] = true
	}
	if c.HeartbeatInterval < 0 || c.CallTimeout < 0 || c.ShutdownGrace < 0 || c.SessionIdleTimeout < 0 {
		bad("durations must not be negative")
	}
	if c.MaxInFlight < 0 || c.MaxResultBytes < 0 {
		bad("max_in_flight and max_result_bytes must not be negative")
	}
	return errors.Join(errs...)
}

func (c *Config) fillDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.CallTimeout, DefaultCallTimeout)
	def(&c.ShutdownGrace, DefaultShutdownGrace)
	def(&c.SessionIdleTimeout, DefaultSessionIdleTimeout)
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
		t.MaxIdleConns = 0
		c.HTTPClient = &http.Client{Transport: t}
	}
	c.Upstreams = append([]string(nil), c.Upstreams...)
}

// Service is one upstream worker. Create it with [New] and start it with
// [Service.Run]; [Service.Ready] is safe for concurrent use.
type Service struct {
	cfg    Config
	nc     *nats.Conn
	log    *slog.Logger
	boot   int64 // Unix nanoseconds
	serves map[string]bool
	hbSubj string
	wkSubj string
	grSubj string        // switchyard.v1.grant.<id>.*: calls edges send on route grants
	sem    chan struct{} // one token per in-flight call
	runner *runner       // runs the admitted calls
	hbKick chan struct{} // cap 1: publish a heartbeat now
	closer *upstream.Closer
	mgr    *manager
	met    *metrics.Worker
	// mgrSet is mgr for readers outside the Run goroutine (metrics
	// scrapes, readiness), nil until Run has built it.
	mgrSet atomic.Pointer[manager]
	wkSub  atomic.Pointer[nats.Subscription] // the worker subject's, for its pending count
	grSub  atomic.Pointer[nats.Subscription] // the grant subject's, for backlog
	// taskIDs is the fleet's task id codec (KV switchyard_keys), set by Run
	// before the first upstream starts.
	taskIDs *taskid.Codec
	// grantKey verifies the tokens of calls sent on route grants
	// (proto.KeyGrants), set by Run before it subscribes.
	grantKey atomic.Pointer[grant.Key]
	// tune adjusts every upstream's options (tests shorten timings).
	tune func(*upstream.Options)

	running  atomic.Bool
	live     atomic.Bool // intake subscriptions are in place
	synced   atomic.Bool // the catalog's current values are loaded
	stopping atomic.Bool

	callBase  context.Context // parent of every call; cancelled when the grace ends
	killCalls context.CancelFunc

	intakeMu   sync.RWMutex
	intakeOpen bool           // guarded by intakeMu: calls may still be admitted
	inflight   sync.WaitGroup // calls admitted while intakeOpen

	callsMu sync.Mutex
	calls   map[callKey]*callEntry // guarded by callsMu: cancellable calls
	kept    *replyKeep             // replies sent lately, sent again on request (keep.go)

	subs []*nats.Subscription // intake and event subscriptions (Run goroutine only)
}

// New validates cfg, fills its defaults and returns a worker on nc. It does
// no I/O and starts no goroutine. A nil log discards; a nil nc panics.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	if nc == nil {
		panic("worker: nil NATS connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fillDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hb, err := proto.EvtWorkerSubject(cfg.ID)
	if err != nil {
		return nil, err
	}
	wk, err := proto.WorkerSubjectAll(cfg.ID)
	if err != nil {
		return nil, err
	}
	gr, err := proto.GrantSubjectAll(cfg.ID)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:    cfg,
		nc:     nc,
		log:    log.With(proto.LogComponent, "upstream-worker", proto.LogWorker, cfg.ID),
		serves: map[string]bool{},
		hbSubj: hb,
		wkSubj: wk,
		grSubj: gr,
		sem:    make(chan struct{}, cfg.MaxInFlight),
		runner: newRunner(min(cfg.MaxInFlight, runnerKeep)),
		hbKick: make(chan struct{}, 1),
		closer: upstream.NewCloser(),
		calls:  map[callKey]*callEntry{},
		kept:   newReplyKeep(),
	}
	for _, u := range cfg.Upstreams {
		s.serves[u] = true
	}
	reg := metrics.Or(cfg.Metrics)
	if s.met, err = metrics.NewWorker(reg); err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	if err := reg.Register(poolCollector{s}); err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	return s, nil
}

// Ready reports whether the worker takes calls: its subscriptions are live
// and the upstream catalog is loaded (individual upstreams may still be
// connecting; heartbeats say which are up). False again once shutdown
// starts.
func (s *Service) Ready() bool {
	return s.live.Load() && s.synced.Load() && !s.stopping.Load()
}

// Run subscribes, follows the catalog, runs one actor per served upstream
// and publishes heartbeats until ctx ends, then shuts down gracefully:
// stop intake, send a goodbye heartbeat, wait for in-flight calls (bounded
// by ShutdownGrace, then cancel them), stop the upstreams and wait for
// their sessions to close (bounded by what is left of the grace, then kill
// them). When Run returns, every goroutine it started has exited. It does
// not drain or close nc, which belongs to the caller. Call it once.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	s.boot = time.Now().UnixNano()
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("worker: jetstream: %w", err)
	}
	s.callBase, s.killCalls = context.WithCancel(context.WithoutCancel(ctx))
	defer s.killCalls()
	actorsCtx, stopActors := context.WithCancel(context.WithoutCancel(ctx))
	defer stopActors()
	// Waits for tenancy-svc to have provisioned the fleet's secrets (and
	// with them every bucket): the worker is not ready until then.
	tk, err := bus.Secret(ctx, js, proto.KeyTasks, s.log)
	if err == nil {
		s.taskIDs, err = taskid.New(tk)
	}
	var gk []byte
	if err == nil {
		gk, err = bus.Secret(ctx, js, proto.KeyGrants, s.log)
	}
	if err == nil {
		var k *grant.Key
		if k, err = grant.NewKey(gk); err == nil {
			s.grantKey.Store(k)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("worker: %w", err)
	}
	s.mgr = newManager(s, actorsCtx, toolstore.New(js))
	s.mgrSet.Store(s.mgr)
	if err := s.checkUniqueID(); err != nil {
		return err
	}
	s.intakeOpen = true
	if err := s.subscribe(); err != nil {
		s.unsubscribe()
		return err
	}
	s.live.Store(true)
	svc, err := admin.AddService(s.nc, admin.ServiceConfig{
		Name: MicroService, ID: s.cfg.ID, Version: metrics.Version(),
		Description: "Switchyard upstream worker: upstream MCP sessions",
	})
	if err != nil {
		s.unsubscribe()
		return fmt.Errorf("worker: micro service: %w", err)
	}
	s.log.Info("worker started")

	var wg sync.WaitGroup
	wg.Go(func() { s.heartbeats(ctx) })
	// The fleet's keys change when tenancy-svc makes them again (the NATS
	// store was lost): every worker follows, so all agree.
	wg.Go(func() {
		bus.FollowSecret(ctx, js, proto.KeyTasks, tk, bus.SecretFollowInterval, func(b []byte) {
			if err := s.taskIDs.Rekey(b); err != nil {
				s.log.Error("new task id key unusable; keeping the old", proto.LogErr, err)
				return
			}
			s.log.Warn("the fleet's task id key changed; minting under the new one")
			// A new key means a new store (lost, and made again by
			// tenancy-svc): its lists bucket is empty. Announce them again.
			for _, u := range s.mgr.all() {
				go func() {
					rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					if perr := u.RefreshCatalog(rctx); perr != nil {
						s.log.Warn("lists not announced again", proto.LogErr, perr)
					}
				}()
			}
		})
	})
	wg.Go(func() {
		bus.FollowSecret(ctx, js, proto.KeyGrants, gk, bus.SecretFollowInterval, func(b []byte) {
			k, err := grant.NewKey(b)
			clear(b)
			if err != nil {
				s.log.Error("new route grant key unusable; keeping the old", proto.LogErr, err)
				return
			}
			s.grantKey.Store(k)
			s.log.Warn("the fleet's route grant key changed; verifying with the new one")
		})
	})
	wg.Go(func() { _ = specwatch.Watch(ctx, js, s.mgr, s.log) })
	wg.Wait() // both end with ctx
	_ = svc.Stop()
	s.shutdown(stopActors)
	return nil
}

// shutdown runs after ctx ended and the Run children have exited.
//
// It drains: a draining heartbeat first (routers and edges place nothing
// more here, but keep the worker alive, so its calls in flight are not
// failed), then intake stops, the calls in flight finish (with draining
// heartbeats meanwhile, so silence does not make it gone), and only then
// the goodbye. A call is thus answered by the worker that ran it, and a
// client never gets "worker lost" for a call that completes.
func (s *Service) shutdown(stopActors context.CancelFunc) {
	deadline := time.Now().Add(s.cfg.ShutdownGrace)
	s.stopping.Store(true)
	s.publishHeartbeat(false) // Draining
	_ = s.nc.FlushTimeout(time.Second)
	beating := make(chan struct{})
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		t := time.NewTicker(s.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-beating:
				return
			case <-t.C:
				s.publishHeartbeat(false)
			}
		}
	}()
	s.stopIntake(deadline)
	s.waitInFlight(deadline)
	close(beating)
	<-beats
	s.publishHeartbeat(true)
	_ = s.nc.FlushTimeout(time.Second)
	s.runner.stop()
	stopActors()
	s.mgr.wait()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	s.closer.Wait(ctx)
	cancel()
	s.log.Info("worker stopped")
}

// waitInFlight waits for the admitted calls until deadline, then cancels
// them and waits for their handlers, which return as soon as their context
// ends.
func (s *Service) waitInFlight(deadline time.Time) {
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("shutdown grace over, cancelling in-flight calls")
		s.killCalls()
		<-done
	}
}
