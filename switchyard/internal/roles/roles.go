// Package roles runs any set of Switchyard's roles in one process, each on
// its own NATS connection so that behaviour matches separate processes.
package roles

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/edge"
	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/router"
	tenancy "github.com/switchyard-mcp/switchyard/tenancy-svc"
	worker "github.com/switchyard-mcp/switchyard/upstream-worker"
)

// Builder constructs one role, registering its metrics in reg and making
// its spans with tp (the role's Config.Tracer; off when tracing is
// disabled, nil for a role that makes no spans).
type Builder = app.TracedBuilder

// Order is every role, in start order.
var Order = []string{"tenancy-svc", "router", "upstream-worker", "edge"}

// Builders maps role names to constructors.
var Builders = map[string]Builder{
	"tenancy-svc": func(f *config.File, nc *nats.Conn, l *slog.Logger, _ prometheus.Registerer, _ *trace.Provider) (app.Role, error) {
		return tenancy.New(tenancy.FromFile(f), nc, l)
	},
	"router": func(f *config.File, nc *nats.Conn, l *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (app.Role, error) {
		c := router.FromFile(f)
		c.Metrics = reg
		c.Tracer = tp
		return router.New(c, nc, l)
	},
	"upstream-worker": func(f *config.File, nc *nats.Conn, l *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (app.Role, error) {
		c := worker.FromFile(f)
		c.Metrics = reg
		c.Tracer = tp
		return worker.New(c, nc, l)
	},
	"edge": func(f *config.File, nc *nats.Conn, l *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (app.Role, error) {
		c := edge.FromFile(f)
		c.Metrics = reg
		c.Tracer = tp
		return edge.New(c, nc, l)
	},
}

// traced are the roles that make spans (each gets its own Provider, so a
// span names the hop that made it).
var traced = map[string]bool{"edge": true, "router": true, "upstream-worker": true}

// Parse turns "edge,router" (or "all") into role names in start order.
func Parse(list string) ([]string, error) {
	if list == "" || list == "all" {
		return Order, nil
	}
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if _, ok := Builders[n]; !ok {
			return nil, fmt.Errorf("unknown role %q (roles: %s)", n, strings.Join(Order, ", "))
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(Order, a) - slices.Index(Order, b) })
	return slices.Compact(out), nil
}

// Set is a running set of roles.
type Set struct {
	Roles map[string]app.Role
	// Registry holds the metrics of every role of the set (one registry
	// per process: role metric names do not collide), with the Go runtime,
	// process and build info collectors.
	Registry *prometheus.Registry
	conns    []*nats.Conn
	tracers  []*trace.Provider
	log      *slog.Logger
	file     *config.File
}

// Build constructs the roles, each with a connection from connect, into a
// new registry (metrics.NewRegistry).
func Build(names []string, f *config.File, connect func(role string) (*nats.Conn, error), log *slog.Logger) (*Set, error) {
	return BuildWith(names, f, connect, log, metrics.NewRegistry())
}

// BuildWith is Build registering every role's metrics, and its NATS
// connection's (metrics.RegisterNATS), in reg. Each role that makes spans
// (edge, router, upstream-worker) gets its own trace Provider built from
// f's tracing section (app.NewTracer) with topts added (tests pass
// trace.WithSpanProcessor to record spans in memory); [Set.Close] shuts
// them down.
func BuildWith(names []string, f *config.File, connect func(role string) (*nats.Conn, error), log *slog.Logger, reg *prometheus.Registry, topts ...trace.Option) (*Set, error) {
	s := &Set{Roles: map[string]app.Role{}, Registry: reg, log: log, file: f}
	for _, n := range names {
		nc, err := connect(n)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: connect: %w", n, err)
		}
		s.conns = append(s.conns, nc)
		if err := metrics.RegisterNATS(reg, n, nc); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: metrics: %w", n, err)
		}
		var tp *trace.Provider // nil, off, for roles without spans
		if traced[n] {
			if tp, err = app.NewTracer(f, n, log, topts...); err != nil {
				s.Close()
				return nil, fmt.Errorf("%s: tracing: %w", n, err)
			}
			s.tracers = append(s.tracers, tp)
		}
		r, err := Builders[n](f, nc, log, reg, tp)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		s.Roles[n] = r
	}
	return s, nil
}

// AddTo adds every role of the set to an admin listener's readiness, and
// mounts the audit search there (app.MountAudit) on auditConn, a
// connection of the audit identity, when the audit trail is on (nil: not
// served).
func (s *Set) AddTo(a *admin.Server, auditConn *nats.Conn) error {
	for n, r := range s.Roles {
		a.AddRole(n, r)
	}
	return app.MountAudit(a, s.file, auditConn, s.log)
}

// Run runs every role until ctx ends or one fails; it returns when all have
// returned, with the first error.
func (s *Set) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(s.Roles))
	for n, r := range s.Roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", n, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Ready reports whether every role is ready.
func (s *Set) Ready() bool {
	for _, r := range s.Roles {
		if !r.Ready() {
			return false
		}
	}
	return true
}

// Close flushes and shuts down the roles' trace providers (together,
// within app.TracerShutdownTimeout) and closes the connections. Call it after
// Run returned.
func (s *Set) Close() {
	// Concurrently: each flush may wait for an unreachable collector.
	var wg sync.WaitGroup
	for _, tp := range s.tracers {
		wg.Go(func() { app.ShutdownTracer(tp, s.log) })
	}
	wg.Wait()
	s.tracers = nil
	for _, nc := range s.conns {
		nc.Close()
	}
}
