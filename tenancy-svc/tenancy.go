package tenancy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/provision"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Config configures the tenancy service.
type Config struct {
	// Upstreams is the catalog to seed. Names must be unique slugs.
	Upstreams []proto.UpstreamSpec
	// Tenants are the tenants the configuration owns (seeded into
	// switchyard_tenants; see the package doc for the rule). They must
	// pass tenancy.CheckTenants. Empty: none (FromFile supplies the
	// default tenant when the file configures none).
	Tenants []tenancy.Tenant
	// APIKeys are the key records the configuration owns (hash only),
	// each naming one of Tenants, with a valid id, hash and principal;
	// ids unique. Empty: none.
	APIKeys []apikey.Record
	// Problems are errors found while loading the configuration that
	// concern only this service (API keys that could not be read); New
	// fails with them. Empty: none.
	Problems []error
	// Version is the admin micro service's version (semver). Empty: the
	// build's (the main module's version or VCS revision), else
	// 0.0.0-devel.
	Version string
	// Provision is what the service creates on the NATS server before
	// seeding, and again on every reconcile (a server that lost its store
	// gets it all back): the deployment's buckets, streams and shared
	// secrets (internal/provision; no other role creates them). Nil:
	// every bucket and secret, no audit stream (FromFile plans the audit
	// stream when the audit trail is on).
	Provision *provision.Plan
}

// Service is a running tenancy service.
type Service struct {
	cfg     Config
	nc      *nats.Conn
	log     *slog.Logger
	mailbox chan job      // admin requests for the Run goroutine; bounded
	stopped chan struct{} // closed when Run returns: queued requests are not served
	js      jetstream.JetStream
	watch   *tenancy.Watcher // the snapshot the resolve endpoints answer from
	ready   atomic.Bool

	// Owned by the Run goroutine.
	st     *stores
	seeded bool   // the first seed has completed
	drift  string // the provision drift last logged
}

// semver is the version syntax micro accepts (semver.org's suggested
// expression).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// New validates cfg, reporting every problem. It does no I/O.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	if nc == nil {
		panic("tenancy: nil connection")
	}
	errs := append([]error(nil), cfg.Problems...)
	seen := map[string]bool{}
	for _, u := range cfg.Upstreams {
		if !proto.ValidSlug(u.Name) || seen[u.Name] {
			errs = append(errs, fmt.Errorf("upstream name %q is invalid or duplicate", u.Name))
		}
		seen[u.Name] = true
	}
	if err := tenancy.CheckTenants(cfg.Tenants); err != nil {
		errs = append(errs, err)
	}
	tenants := map[string]bool{}
	for _, t := range cfg.Tenants {
		tenants[t.Name] = true
	}
	ids := map[string]bool{}
	for i, r := range cfg.APIKeys {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("api key %d (%s/%s): "+format, append([]any{i, r.Tenant, r.Principal}, a...)...))
		}
		switch {
		case !apikey.ValidID(r.ID) || len(r.Hash) != apikey.HashLen:
			bad("not a key record (key not loaded?)")
		case ids[r.ID]:
			bad("id %s: duplicate", r.ID)
		}
		ids[r.ID] = true
		if !tenants[r.Tenant] {
			bad("tenant %q is not configured", r.Tenant)
		}
		if err := tenancy.CheckPrincipal(r.Principal); err != nil {
			bad("%v", err)
		}
	}
	if cfg.Version == "" {
		cfg.Version = buildVersion()
	} else if !semver.MatchString(cfg.Version) {
		errs = append(errs, fmt.Errorf("version %q is not semver", cfg.Version))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("tenancy: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Provision == nil {
		cfg.Provision = &provision.Plan{KV: provision.Buckets(), Secrets: provision.Secrets()}
	}
	js, err := jetstream.New(nc) // no I/O
	if err != nil {
		return nil, fmt.Errorf("tenancy: jetstream: %w", err)
	}
	watch, err := tenancy.NewWatcher(js, tenancy.WatcherConfig{}, log)
	if err != nil {
		return nil, fmt.Errorf("tenancy: %w", err)
	}
	return &Service{
		cfg: cfg, nc: nc, log: log.With(proto.LogComponent, "tenancy"),
		mailbox: make(chan job, mailboxLen),
		stopped: make(chan struct{}),
		js:      js, watch: watch,
	}, nil
}

// Ready reports whether the buckets have been seeded, the micro service
// (admin and resolve endpoints) is serving, and the snapshot the resolve
// endpoints answer from has loaded. It stays true while that snapshot is
// stale (KV unreachable: the last one keeps serving).
func (s *Service) Ready() bool { return s.ready.Load() && s.watch.Ready() }

// reconcileEvery is how often the buckets are checked against the config.
const reconcileEvery = 10 * time.Second

// Run opens and seeds the buckets (retrying while JetStream is
// unavailable), starts the micro service (admin and resolve endpoints),
// and then serves admin requests and reconciles the buckets with the
// config every reconcileEvery until ctx ends. Admin requests and seeding
// run on this goroutine only, one at a time; resolve requests are
// answered on the NATS callback goroutines from a tenancy.Watcher's
// snapshot, which a goroutine of Run keeps current. It returns nil when
// ctx ends, or an error if the micro service cannot start; either way
// that goroutine has exited. Run is called once.
func (s *Service) Run(ctx context.Context) error {
	// Admin handlers wait for their job's outcome; after Run they get 503.
	defer close(s.stopped)
	js := s.js
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		if err := s.watch.Run(wctx); err != nil {
			s.log.Error("tenancy watcher failed", proto.LogErr, err)
		}
	}()
	defer func() { wcancel(); <-wdone }()
	backoff := 100 * time.Millisecond
	for {
		err := s.seed(ctx, js)
		if err == nil {
			break
		}
		s.log.Warn("seed failed, retrying", proto.LogErr, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	svc, err := s.startAdmin()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("tenancy: micro service: %w", err)
	}
	// Ready means the endpoints answer: the server has the subscriptions.
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn("admin service: flush failed", proto.LogErr, err)
	}
	s.ready.Store(true)
	s.log.Info("seeded", "upstreams", len(s.cfg.Upstreams), "tenants", len(s.cfg.Tenants), "api_keys", len(s.cfg.APIKeys))
	// Reconcile now and then: a NATS server restarted without its store
	// (or an operator's stray edit) must not leave the buckets empty.
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.ready.Store(false)
			if err := svc.Stop(); err != nil {
				s.log.Warn("admin service stop failed", proto.LogErr, err)
			}
			s.refuseQueued()
			return nil
		case <-t.C:
			if err := s.seed(ctx, js); err != nil && ctx.Err() == nil {
				s.log.Warn("reconcile failed", proto.LogErr, err)
			}
		case j := <-s.mailbox:
			s.serve(ctx, j)
		}
	}
}

// startAdmin adds the micro service with its admin and resolve endpoints.
func (s *Service) startAdmin() (micro.Service, error) {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        tenancy.AdminService,
		Version:     s.cfg.Version,
		Description: "Switchyard tenancy: tenants and API keys (admin), key, principal and access lookups (resolve)",
		QueueGroup:  tenancy.AdminService,
		Metadata: map[string]string{
			"buckets": tenancy.BucketTenants + "," + tenancy.BucketAPIKeys + "," + proto.BucketUpstreams,
		},
	})
	if err != nil {
		return nil, err
	}
	g := svc.AddGroup(tenancy.AdminGroup)
	for _, ep := range endpoints {
		// An admin handler waits while the Run goroutine serves its
		// request: bound what queues behind it.
		limits := micro.WithEndpointPendingLimits(mailboxLen, mailboxLen*maxRequestBytes)
		if err := g.AddEndpoint(ep.name, s.enqueuer(ep.op, tenancy.AdminGroup+"."+ep.subject), micro.WithEndpointSubject(ep.subject), limits); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("endpoint %s: %w", ep.name, err)
		}
	}
	if err := s.addResolve(svc); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc, nil
}
