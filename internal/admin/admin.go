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
// # Access
//
// Requests present "Authorization: Bearer <key or JWT>", checked by the
// [Auth] of [Config] (admin keys by hash, JWTs whose claim grants a
// [Scope]). Each endpoint has a [Rule], applied by [Policy.Decide] for
// the address the listener is bound to:
//
//   - /healthz and /readyz are open; on a listener that is not trusted
//     (not loopback, not insecure) /readyz shows its per-check lines
//     only to a valid credential, and the ready/not ready summary (and
//     status code) to everyone;
//   - /metrics is open on a trusted listener, else needs scope metrics
//     or admin;
//   - the audit search (/audit/, [RuleAudit]) needs scope audit or admin
//     on every listener, loopback included.
//
// A listener that is not on loopback, has no credential and is not
// insecure refuses to start ([ErrNoCredential]).
//
// # Contract for other packages
//
// A role adds itself with [Server.AddRole]; a role implementing [Checker]
// reports its checks, any other role one check "ready" from Ready().
// Libraries add HTTP handlers with [Server.Mount] and the [Rule] that
// guards them (any time, also while serving) and metrics by registering
// into the registry the process gave them; they must not start listeners
// of their own.
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
	Role  string `json:"role"`
	Ready bool   `json:"ready"`
	// Checks are absent from the summary an untrusted listener shows
	// without a credential ([Report.Summary]).
	Checks []Check `json:"checks,omitempty"`
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

// Summary is rep without the checks (their details can name upstream
// hosts and errors): the ready flags of the process and of each role.
func (rep Report) Summary() Report {
	sum := Report{Ready: rep.Ready, Roles: make([]RoleReport, len(rep.Roles))}
	for i, r := range rep.Roles {
		sum.Roles[i] = RoleReport{Role: r.Role, Ready: r.Ready}
	}
	return sum
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
	// Auth verifies the credentials requests present. Nil: none is
	// configured (then the audit search is refused everywhere, and a
	// listener not on loopback refuses to start unless Insecure).
	Auth *Auth
	// Insecure trusts the network as loopback (config admin.insecure):
	// /metrics and readiness details without a credential on any
	// address; the audit search still needs one. Logged as a warning.
	Insecure bool
}

// Server is an admin listener. Create it with [New]; [Server.AddRole] and
// [Server.Mount] are safe for concurrent use, before or during
// [Server.Run].
type Server struct {
	cfg  Config
	log  *slog.Logger
	mux  *http.ServeMux
	addr atomic.Pointer[string]
	// policy is the access rule of the address bound (Config.Addr's
	// until Listen or Serve).
	policy atomic.Pointer[Policy]

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
	s.setPolicy(cfg.Addr)
	if cfg.Gatherer != nil {
		s.Mount("GET /metrics", RuleMetrics, promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{
			EnableOpenMetrics: true,
			ErrorLog:          slogPrinter{s.log},
		}))
	}
	s.Mount("GET /healthz", RuleOpen, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }))
	s.Mount("GET /readyz", RuleOpen, http.HandlerFunc(s.serveReady))
	s.Mount("GET /readyz/{role}", RuleOpen, http.HandlerFunc(s.serveReady))
	return s
}

// setPolicy makes the policy of a listener bound to addr the one applied.
func (s *Server) setPolicy(addr string) Policy {
	p := NewPolicy(addr, s.cfg.Auth != nil, s.cfg.Insecure)
	s.policy.Store(&p)
	return p
}

// Policy is the access rule applied now: the bound address's once
// listening, Config.Addr's before.
func (s *Server) Policy() Policy { return *s.policy.Load() }

// AddRole adds a role to /readyz under name (replacing one of that name).
func (s *Server) AddRole(name string, r Readier) {
	s.mu.Lock()
	s.roles[name] = r
	s.mu.Unlock()
}

// Mount serves h on pattern (an http.ServeMux pattern, e.g.
// "GET /audit/search" or "/debug/") to the requests rule lets through
// ([Policy.Decide]); the others get a JSON {"error": "..."} 401 or 403.
// It panics, as ServeMux does, when pattern conflicts with one already
// mounted.
func (s *Server) Mount(pattern string, rule Rule, h http.Handler) {
	s.mux.Handle(pattern, s.guard(pattern, rule, h))
}

// guard applies rule to the requests for h (mounted at pattern).
func (s *Server) guard(pattern string, rule Rule, h http.Handler) http.Handler {
	if rule.Scope == 0 {
		return h
	}
	endpoint := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		endpoint = path
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.Policy()
		var c Credential
		if p.Configured && (rule.Always || !p.Trusted()) {
			c = s.cfg.Auth.Authenticate(r)
		}
		d := p.Decide(endpoint, rule, c)
		if d.Allowed() {
			h.ServeHTTP(w, r)
			return
		}
		lvl := slog.LevelDebug
		if c.Presented {
			lvl = slog.LevelInfo
		}
		s.log.Log(r.Context(), lvl, "admin request refused", "path", r.URL.Path, "status", d.Status,
			"remote", r.RemoteAddr, "credential", c.Who, "reason", c.Reason)
		refuse(w, d)
	})
}

// Handler is the admin handler, for tests and for serving it elsewhere;
// it applies [Server.Policy].
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
// (bounded by ShutdownGrace). It returns the listen error (or one
// wrapping ErrNoCredential, see Listen), or nil.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.Listen()
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Listen binds Config.Addr (Addr reports it from then on), for a caller
// that wants the listen error before serving; Serve the listener next.
// It closes the listener and returns an error wrapping [ErrNoCredential]
// when the address bound is not loopback, no credential is configured and
// the listener is not insecure.
func (s *Server) Listen() (net.Listener, error) {
	// An IP literal (or no host: every interface) is what will be bound:
	// refuse before opening the port. A name is decided once bound.
	if host, _, err := net.SplitHostPort(s.cfg.Addr); err == nil && (host == "" || net.ParseIP(strings.Split(host, "%")[0]) != nil) {
		if err := NewPolicy(s.cfg.Addr, s.cfg.Auth != nil, s.cfg.Insecure).StartError(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.cfg.Addr, err)
		}
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	if err := s.setPolicy(addr).StartError(); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	s.addr.Store(&addr)
	return ln, nil
}

// Serve is Run on a listener the caller opened (or got from Listen). It
// refuses, as Listen does, a listener that may not serve without a
// credential (leaving ln open).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	addr := ln.Addr().String()
	p := s.setPolicy(addr)
	if err := p.StartError(); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	s.addr.Store(&addr)
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if p.Insecure && !p.Loopback {
		s.log.Warn("admin listener is insecure: /metrics and readiness details are served without a credential to whoever reaches it",
			"addr", addr, "credentials", p.Configured)
	}
	s.log.Info("admin listening", "addr", addr, "loopback", p.Loopback, "credentials", p.Configured)
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
	if !s.showDetails(r) {
		rep = rep.Summary()
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

// showDetails reports whether /readyz may show r its checks: on a
// trusted listener, or to a valid credential with any scope.
func (s *Server) showDetails(r *http.Request) bool {
	p := s.Policy()
	if p.Trusted() {
		return true
	}
	if !p.Configured {
		return false
	}
	c := s.cfg.Auth.Authenticate(r)
	return c.Valid && c.Scope != 0
}

// slogPrinter adapts slog to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	p.log.Warn("metrics scrape failed", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}
