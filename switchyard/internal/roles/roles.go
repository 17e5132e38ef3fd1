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

	"github.com/switchyard-mcp/switchyard/edge"
	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/router"
	tenancy "github.com/switchyard-mcp/switchyard/tenancy-svc"
	worker "github.com/switchyard-mcp/switchyard/upstream-worker"
)

// Builder constructs one role.
type Builder func(*config.File, *nats.Conn, *slog.Logger) (app.Role, error)

// Order is every role, in start order.
var Order = []string{"tenancy-svc", "router", "upstream-worker", "edge"}

// Builders maps role names to constructors.
var Builders = map[string]Builder{
	"tenancy-svc": func(f *config.File, nc *nats.Conn, l *slog.Logger) (app.Role, error) {
		return tenancy.New(tenancy.FromFile(f), nc, l)
	},
	"router": func(f *config.File, nc *nats.Conn, l *slog.Logger) (app.Role, error) {
		return router.New(router.FromFile(f), nc, l)
	},
	"upstream-worker": func(f *config.File, nc *nats.Conn, l *slog.Logger) (app.Role, error) {
		return worker.New(worker.FromFile(f), nc, l)
	},
	"edge": func(f *config.File, nc *nats.Conn, l *slog.Logger) (app.Role, error) {
		return edge.New(edge.FromFile(f), nc, l)
	},
}

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
	conns []*nats.Conn
}

// Build constructs the roles, each with a connection from connect.
func Build(names []string, f *config.File, connect func(role string) (*nats.Conn, error), log *slog.Logger) (*Set, error) {
	s := &Set{Roles: map[string]app.Role{}}
	for _, n := range names {
		nc, err := connect(n)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: connect: %w", n, err)
		}
		s.conns = append(s.conns, nc)
		r, err := Builders[n](f, nc, log)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		s.Roles[n] = r
	}
	return s, nil
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

// Close closes the connections.
func (s *Set) Close() {
	for _, nc := range s.conns {
		nc.Close()
	}
}
