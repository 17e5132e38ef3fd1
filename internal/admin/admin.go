// Package admin is a role process's admin HTTP listener (config key
// `admin`, flag --admin): Prometheus metrics, liveness and readiness, and
// whatever other handlers a library mounts on it (the audit search API,
// debug endpoints).
//
// # Endpoints
//
//   - GET /metrics: the process's registry (internal/metrics.NewRegistry),
//     in the Prometheus text or OpenMetrics format the scraper asks for.
//   - GET /healthz: 200 "ok" while the process serves HTTP (alive).
//   - GET /readyz: every role's checks, one line each ("<role> <check>
//     ok|warn|fail[: detail]"), 200 when none fails, else 503; JSON
//     ([Report]) with ?format=json or Accept: application/json.
//   - GET /readyz/{role}: the same for one role (404 for a role the
//     process does not run).
//
// In embedded mode (`switchyard dev`, `switchyard run` with several
// roles) one listener serves every role: /readyz aggregates their checks
// and /metrics serves the one registry they all register into.
//
// # Contract for other packages
//
// A role adds itself with [Server.AddRole]; a role implementing [Checker]
// reports its checks, any other role one check "ready" from Ready().
// Libraries add HTTP handlers with [Server.Mount] (any time, also while
// serving) and metrics by registering into the registry the process gave
// them; they must not start listeners of their own.
package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Status is a check's result.
type Status string

// Check statuses: only StatusFail makes a role not ready; StatusWarn is
// reported (a stale snapshot still serving, an upstream down while
// others are up) without taking the process out of its load balancer.
const (
	StatusOK   Status = "ok"
	StatusWarn Status = "warn"
	StatusFail Status = "fail"
)

// Check is one readiness condition of a role.
type Check struct {
	// Name is a short lower_snake name: nats, subscriptions, catalog,
	// tenancy, upstream/<name>, ...
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says why, for warn and fail; never a secret.
	Detail string `json:"detail,omitempty"`
}

// OK returns a passing check, or a failing one with detail when !ok.
func OK(name string, ok bool, detail string) Check {
	if ok {
		return Check{Name: name, Status: StatusOK}
	}
	return Check{Name: name, Status: StatusFail, Detail: detail}
}

// Readier is what every role offers.
type Readier interface{ Ready() bool }

// Checker is a role that reports its readiness check by check. Checks is
// called on every /readyz request, concurrently with the role's work: it
// must be cheap and must not block.
type Checker interface {
	Readier
	Checks() []Check
}

// RoleReport is one role's readiness.
type RoleReport struct {
	Role   string  `json:"role"`
	Ready  bool    `json:"ready"`
	Checks []Check `json:"checks"`
}

// Report is the readiness of every role of the process.
type Report struct {
	Ready bool         `json:"ready"`
	Roles []RoleReport `json:"roles"`
}

// Evaluate returns the readiness of r as the role named role: its checks
// (one "ready" check from Ready for a role that is not a [Checker]); it is
// ready when no check fails.
func Evaluate(role string, r Readier) RoleReport {
	var checks []Check
	if c, ok := r.(Checker); ok {
		checks = c.Checks()
	} else {
		checks = []Check{OK("ready", r.Ready(), "not ready")}
	}
	rr := RoleReport{Role: role, Ready: true, Checks: checks}
	for _, c := range checks {
		if c.Status == StatusFail {
			rr.Ready = false
		}
	}
	return rr
}

// Aggregate evaluates every role (sorted by name); the process is ready
// when every role is. A process with no roles is not ready.
func Aggregate(roles map[string]Readier) Report {
	rep := Report{Ready: len(roles) > 0}
	for name, r := range roles {
		rr := Evaluate(name, r)
		rep.Ready = rep.Ready && rr.Ready
		rep.Roles = append(rep.Roles, rr)
	}
	slices.SortFunc(rep.Roles, func(a, b RoleReport) int { return cmp.Compare(a.Role, b.Role) })
	return rep
}

// Text renders rep as /readyz's plain-text body: "ready" or "not ready",
// then one line per check.
func (rep Report) Text() string {
	var b strings.Builder
	if rep.Ready {
		b.WriteString("ready\n")
	} else {
		b.WriteString("not ready\n")
	}
	for _, r := range rep.Roles {
		for _, c := range r.Checks {
			b.WriteString(r.Role)
			b.WriteByte(' ')
			b.WriteString(c.Name)
			b.WriteByte(' ')
			b.WriteString(string(c.Status))
			if c.Detail != "" {
				b.WriteString(": ")
				b.WriteString(c.Detail)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Config configures an admin listener.
type Config struct {
	// Addr is host:port to listen on ("127.0.0.1:9090"; port 0 picks
	// one). Required by Run.
	Addr string
	// Gatherer is what /metrics serves. Nil: /metrics answers 404.
	Gatherer prometheus.Gatherer
	// ShutdownGrace bounds the HTTP shutdown when Run's ctx ends. Default 2s.
	ShutdownGrace time.Duration
}

// Server is an admin listener. Create it with [New]; [Server.AddRole] and
// [Server.Mount] are safe for concurrent use, before or during
// [Server.Run].
type Server struct {
	cfg  Config
	log  *slog.Logger
	mux  *http.ServeMux
	addr atomic.Pointer[string]

	mu    sync.Mutex
	roles map[string]Readier // guarded by mu
}

// New returns an admin server. It does no I/O. A nil log discards.
func New(cfg Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	s := &Server{cfg: cfg, log: log.With("component", "admin"), mux: http.NewServeMux(), roles: map[string]Readier{}}
	if cfg.Gatherer != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{
			EnableOpenMetrics: true,
			ErrorLog:          slogPrinter{s.log},
		}))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	s.mux.HandleFunc("GET /readyz", s.serveReady)
	s.mux.HandleFunc("GET /readyz/{role}", s.serveReady)
	return s
}

// AddRole adds a role to /readyz under name (replacing one of that name).
func (s *Server) AddRole(name string, r Readier) {
	s.mu.Lock()
	s.roles[name] = r
	s.mu.Unlock()
}

// Mount serves h on pattern (an http.ServeMux pattern, e.g.
// "GET /audit/search" or "/debug/"). It panics, as ServeMux does, when
// pattern conflicts with one already mounted.
func (s *Server) Mount(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler is the admin handler, for tests and for serving it elsewhere.
func (s *Server) Handler() http.Handler { return s.mux }

// Report evaluates the readiness of every role added.
func (s *Server) Report() Report {
	s.mu.Lock()
	roles := make(map[string]Readier, len(s.roles))
	for k, v := range s.roles {
		roles[k] = v
	}
	s.mu.Unlock()
	return Aggregate(roles)
}

// Addr is the address Run listens on, once bound ("" before).
func (s *Server) Addr() string {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// Run listens on Config.Addr and serves until ctx ends, then shuts down
// (bounded by ShutdownGrace). It returns the listen error, or nil.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Listen binds Config.Addr (Addr reports it from then on), for a caller
// that wants the listen error before serving; Serve the listener next.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	s.addr.Store(&addr)
	return ln, nil
}

// Serve is Run on a listener the caller opened (or got from Listen).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	addr := ln.Addr().String()
	s.addr.Store(&addr)
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	s.log.Info("admin listening", "addr", addr)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	var rep Report
	if role := r.PathValue("role"); role != "" {
		s.mu.Lock()
		rl, ok := s.roles[role]
		s.mu.Unlock()
		if !ok {
			http.Error(w, "unknown role", http.StatusNotFound)
			return
		}
		rr := Evaluate(role, rl)
		rep = Report{Ready: rr.Ready, Roles: []RoleReport{rr}}
	} else {
		rep = s.Report()
	}
	status := http.StatusOK
	if !rep.Ready {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(rep)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(rep.Text()))
}

// slogPrinter adapts slog to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	p.log.Warn("metrics scrape failed", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}
