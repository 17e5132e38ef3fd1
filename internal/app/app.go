// Package app is the shared body of Switchyard's role commands: flags,
// configuration, logging, the NATS connection, signals and the run loop.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Role is what every role's Service offers.
type Role interface {
	Run(ctx context.Context) error
	Ready() bool
}

// Flags are the command-line settings common to role commands. Flags win
// over the environment, which wins over the file.
type Flags struct {
	Config string
	// NATS, NATSCreds, NATSCA, NATSCert and NATSKey override the config's
	// nats section (config.NATSFile).
	NATS, NATSCreds, NATSCA, NATSCert, NATSKey string
	Listen                                     string
	ID                                         string
	LogFormat                                  string
	LogLevel                                   string
	CheckConfig                                bool
	// PprofAddr, if set, serves net/http/pprof on that address.
	PprofAddr string
	// Admin, if set, overrides the config's admin listener address.
	Admin string
}

// Register adds the common flags to fs, with JSON logs by default.
func (f *Flags) Register(fs *flag.FlagSet) { f.RegisterFormat(fs, "json") }

// RegisterFormat adds the common flags to fs with the given default log
// format ("json" or "text"; SWITCHYARD_LOG_FORMAT overrides it).
func (f *Flags) RegisterFormat(fs *flag.FlagSet, format string) {
	fs.StringVar(&f.Config, "config", os.Getenv("SWITCHYARD_CONFIG"), "config file (YAML); env SWITCHYARD_CONFIG")
	fs.StringVar(&f.NATS, "nats", "", "NATS server URL, or several comma-separated (default from config, else nats://127.0.0.1:4222); env SWITCHYARD_NATS")
	fs.StringVar(&f.NATSCreds, "nats-creds", "", "NATS user credentials file, or a directory of <identity>.creds (switchyard nats init); env SWITCHYARD_NATS_CREDS")
	fs.StringVar(&f.NATSCA, "nats-ca", "", "CA (PEM) of the NATS server's certificate; requires TLS; env SWITCHYARD_NATS_CA")
	fs.StringVar(&f.NATSCert, "nats-cert", "", "client certificate (PEM) for NATS, with --nats-key; env SWITCHYARD_NATS_CERT")
	fs.StringVar(&f.NATSKey, "nats-key", "", "client certificate key (PEM) for NATS; env SWITCHYARD_NATS_KEY")
	fs.StringVar(&f.Listen, "listen", "", "edge HTTP address (overrides config listen); env SWITCHYARD_LISTEN")
	fs.StringVar(&f.ID, "id", "", "this process's id (a slug; overrides edge.id / worker.id)")
	fs.StringVar(&f.LogFormat, "log-format", envOr("SWITCHYARD_LOG_FORMAT", format), "log format: json or text")
	fs.StringVar(&f.LogLevel, "log-level", envOr("SWITCHYARD_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	fs.BoolVar(&f.CheckConfig, "check-config", false, "print the effective config and exit")
	fs.StringVar(&f.Admin, "admin", "", "admin listener (/metrics, /healthz, /readyz, /audit/) address, e.g. 127.0.0.1:9090 (overrides config admin.listen; not on loopback it needs a credential: SWITCHYARD_ADMIN_KEY_FILE, admin.keys); env SWITCHYARD_ADMIN")
	fs.StringVar(&f.PprofAddr, "pprof", os.Getenv("SWITCHYARD_PPROF"), "serve net/http/pprof on this address (e.g. 127.0.0.1:6060); off by default")
}

// StartPprof serves the profiling endpoints when PprofAddr is set. It
// refuses an address that is not loopback: profiles and heap dumps show
// what the process holds, secrets included, and the endpoints take no
// credential.
func (f *Flags) StartPprof(log *slog.Logger) error {
	if f.PprofAddr == "" {
		return nil
	}
	if !admin.IsLoopback(f.PprofAddr) {
		return fmt.Errorf("--pprof %s: not a loopback address (profiles show secrets; the endpoints take no credential): use 127.0.0.1:PORT and an SSH tunnel", f.PprofAddr)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	go func() {
		srv := &http.Server{Addr: f.PprofAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		if err := srv.ListenAndServe(); err != nil {
			log.Warn("pprof listener failed", "err", err)
		}
	}()
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Load reads the config and applies the flags.
func (f *Flags) Load() (*config.File, error) {
	c, err := config.Load(f.Config)
	if err != nil {
		return nil, err
	}
	if f.NATS != "" {
		c.NATS.URL = f.NATS
	}
	if f.NATSCreds != "" {
		c.NATS.Creds = f.NATSCreds
	}
	if f.NATSCA != "" {
		c.NATS.CA = f.NATSCA
	}
	if f.NATSCert != "" {
		c.NATS.Cert = f.NATSCert
	}
	if f.NATSKey != "" {
		c.NATS.Key = f.NATSKey
	}
	if f.Listen != "" {
		c.Listen = f.Listen
	}
	if f.ID != "" {
		c.Edge.ID, c.Worker.ID = f.ID, f.ID
	}
	if f.Admin != "" {
		c.Admin.Listen = f.Admin
	}
	return c, c.Validate()
}

// Logger builds the process logger.
func (f *Flags) Logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(f.LogLevel))
	o := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewJSONHandler(w, o)
	if f.LogFormat == "text" {
		h = slog.NewTextHandler(w, o)
	}
	// Records logged with a context holding a span get trace_id and
	// span_id; without one the wrapper only looks at the context.
	return slog.New(trace.LogHandler(h))
}

// Prepare builds the logger, loads the configuration, and handles
// -check-config and -pprof. It returns the exit code to stop with, or -1 to
// go on.
func (f *Flags) Prepare() (*config.File, *slog.Logger, int) {
	log := f.Logger(os.Stderr)
	cfg, err := f.Load()
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return nil, log, 2
	}
	if f.CheckConfig {
		return nil, log, PrintConfig(os.Stdout, cfg)
	}
	if err := f.StartPprof(log); err != nil {
		log.Error("invalid configuration", "err", err)
		return nil, log, 2
	}
	gcDefaults(log)
	return cfg, log, -1
}

// DefaultGOGC is the GC percent a role runs with unless $GOGC says
// otherwise. A role's live heap is small (a few MiB: snapshots, sessions,
// buffers in flight) while it allocates per call, so Go's default of 100
// collects every few hundred calls and GC work dominated the latency tail
// in profiles; 400 trades a few MiB of heap for a quarter of the GC
// cycles. $GOMEMLIMIT, when set, still bounds the heap (Go's soft limit).
const DefaultGOGC = 400

// gcDefaults applies DefaultGOGC when $GOGC is unset.
func gcDefaults(log *slog.Logger) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(DefaultGOGC)
	log.Debug("gc defaults", "gogc", DefaultGOGC, "gomemlimit", os.Getenv("GOMEMLIMIT"))
}

// Builder constructs a role that makes no spans (tenancy-svc) on its
// connection, registering its metrics in reg.
type Builder func(f *config.File, nc *nats.Conn, log *slog.Logger, reg prometheus.Registerer) (Role, error)

// TracedBuilder constructs a role on its connection, registering its
// metrics in reg and making its spans with tp (the role's Config.Tracer;
// off when tracing is disabled, nil for a role that makes no spans). The caller owns tp
// and shuts it down after the role's Run returned.
type TracedBuilder func(f *config.File, nc *nats.Conn, log *slog.Logger, reg prometheus.Registerer, tp *trace.Provider) (Role, error)

// TraceRole is the role name a process role reports in its spans
// (service.name <service_name>-<role>): "upstream-worker" is "worker",
// the others keep their name.
func TraceRole(name string) string {
	if name == "upstream-worker" {
		return "worker"
	}
	return name
}

// NewTracer builds the Provider of the role called name (a process role:
// "edge", "router", "upstream-worker") from the tracing section of f, with
// the role's id (edge.id, worker.id) as service.instance.id and export
// errors logged to log (nil: OpenTelemetry's default). opts come after
// those (tests pass trace.WithSpanProcessor). Tracing disabled, it returns
// an off Provider.
func NewTracer(f *config.File, name string, log *slog.Logger, opts ...trace.Option) (*trace.Provider, error) {
	var o []trace.Option
	switch name {
	case "edge":
		if f.Edge.ID != "" {
			o = append(o, trace.WithInstance(f.Edge.ID))
		}
	case "upstream-worker":
		if f.Worker.ID != "" {
			o = append(o, trace.WithInstance(f.Worker.ID))
		}
	}
	if log != nil {
		o = append(o, trace.WithLogger(log))
	}
	return trace.New(f.Tracing, TraceRole(name), append(o, opts...)...)
}

// TracerShutdownTimeout bounds the flush of a role's last spans at exit.
const TracerShutdownTimeout = 5 * time.Second

// ShutdownTracer flushes and stops tp within TracerShutdownTimeout,
// logging a failure (spans lost at exit are not worth a failed exit code).
func ShutdownTracer(tp *trace.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), TracerShutdownTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil && log != nil {
		log.Warn("trace shutdown failed", proto.LogErr, err)
	}
}

// Main runs one role that makes no spans as its own process; see
// [MainTraced].
func Main(name string, args []string, build Builder) int {
	return run(name, args, false, func(f *config.File, nc *nats.Conn, log *slog.Logger, reg prometheus.Registerer, _ *trace.Provider) (Role, error) {
		return build(f, nc, log, reg)
	})
}

// MainTraced runs one role as its own process: it parses args, connects
// to NATS over TCP, builds the role's trace provider (config tracing:,
// off by default) and the role with build, and runs it until
// SIGINT/SIGTERM, with the admin listener (config admin, flag --admin)
// when one is set. After the role's Run returned, the provider is shut
// down, flushing the last spans. It returns the process exit code.
func MainTraced(name string, args []string, build TracedBuilder) int {
	return run(name, args, true, build)
}

// run is Main (traced false: the role gets an off Provider, and no
// exporter is set up) and MainTraced.
func run(name string, args []string, traced bool, build TracedBuilder) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, log, code := f.Prepare()
	if code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := ConnectAs(cfg.NATS, proto.Identity(name), log)
	if err != nil {
		log.Error("nats connect failed", "err", err)
		return 1
	}
	defer nc.Close()
	reg := metrics.NewRegistry()
	if err := metrics.RegisterNATS(reg, name, nc); err != nil {
		log.Error("metrics registration failed", "err", err)
		return 1
	}
	var tp *trace.Provider // nil: off
	if traced {
		tp, err = NewTracer(cfg, name, log)
	}
	if err != nil {
		log.Error("tracing setup failed", proto.LogErr, err)
		return 1
	}
	// Deferred: runs after the role's Run returned (its spans ended).
	defer ShutdownTracer(tp, log)
	role, err := build(cfg, nc, log, reg, tp)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	adm, wait, err := StartAdmin(ctx, cfg, reg, log)
	if err != nil {
		log.Error("admin listener failed", "err", err)
		return 1
	}
	if adm != nil {
		adm.AddRole(name, role)
		anc, err := ConnectAudit(cfg.NATS, log)
		if err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
		if anc != nil {
			defer anc.Close()
		}
		if err := MountAudit(adm, cfg, anc, log); err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
	}
	code = 0
	if err := role.Run(ctx); err != nil {
		log.Error("role failed", "err", err)
		code = 1
	}
	stop()
	_ = wait()
	if code == 0 {
		_ = nc.Drain()
	}
	return code
}

// StartAdmin listens on cfg.Admin.Listen and serves the admin endpoints
// (metrics of reg, health, readiness of the roles added to the returned
// server, the handlers mounted on it) to the credentials of cfg.Admin
// ([AdminConfig]) until ctx ends; wait returns once the listener has shut
// down (and the JWT verifier, if any, has stopped). No address starts
// nothing: the server is nil and wait returns at once. Errors are
// returned at once, so they fail the command: a key that cannot be read,
// a taken port, and a listener not on loopback without a credential
// (wrapping admin.ErrNoCredential, saying how to configure one).
func StartAdmin(ctx context.Context, cfg *config.File, reg *prometheus.Registry, log *slog.Logger) (*admin.Server, func() error, error) {
	if cfg.Admin.Listen == "" {
		return nil, func() error { return nil }, nil
	}
	ac, closeAuth, err := AdminConfig(ctx, cfg, reg, log)
	if err != nil {
		return nil, nil, err
	}
	s := admin.New(ac, log)
	ln, err := s.Listen()
	if err != nil {
		closeAuth()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := s.Serve(ctx, ln)
		closeAuth()
		done <- err
	}()
	return s, func() error { return <-done }, nil
}

// AdminConfig returns the admin listener's configuration from cfg: its
// address, reg as the metrics, and its credentials: the admin keys (their
// records: id and hash, the plaintext is not kept) and, with
// admin.jwt_claim, a JWT verifier of auth.jwt's issuers (cfg's
// AdminJWTConfig), which runs until ctx ends or closeAuth is called. It
// fails, naming the key's source, on a key that could not be read or is
// malformed; it does not check the address (admin.Server.Listen does).
func AdminConfig(ctx context.Context, cfg *config.File, reg *prometheus.Registry, log *slog.Logger) (ac admin.Config, closeAuth func(), err error) {
	a := &cfg.Admin
	ac = admin.Config{Addr: a.Listen, Insecure: a.Insecure}
	if reg != nil {
		ac.Gatherer = reg
	}
	closeAuth = func() {}
	if !a.Configured() {
		return ac, closeAuth, nil
	}
	var keys []admin.Key
	var errs []error
	for i := range a.Keys {
		k := &a.Keys[i]
		rec, err := k.Record()
		if err != nil {
			errs = append(errs, fmt.Errorf("admin.keys[%d]: %w", i, err))
			continue
		}
		scope, ok := admin.ParseScope(k.Scope)
		if !ok {
			errs = append(errs, fmt.Errorf("admin.keys[%d]: scope %q is not admin, audit or metrics", i, k.Scope))
			continue
		}
		keys = append(keys, admin.Key{Record: rec, Scope: scope})
	}
	if err := errors.Join(errs...); err != nil {
		return admin.Config{}, nil, err
	}
	var claim *admin.JWTClaim
	if jc := cfg.AdminJWTConfig(); jc != nil {
		if jc.Logger == nil {
			jc.Logger = log
		}
		v, err := jwtauth.New(ctx, *jc)
		if err != nil {
			return admin.Config{}, nil, fmt.Errorf("admin.jwt_claim: %w", err)
		}
		closeAuth = func() { _ = v.Close() }
		claim = &admin.JWTClaim{Verifier: v, Name: a.JWTClaim.Name, Values: a.JWTClaim.Scopes()}
	} else if a.JWTClaim != nil {
		return admin.Config{}, nil, errors.New("admin.jwt_claim: needs auth.jwt.issuers to verify tokens with")
	}
	auth, err := admin.NewAuth(keys, claim)
	if err != nil {
		closeAuth()
		return admin.Config{}, nil, err
	}
	ac.Auth = auth
	return ac, closeAuth, nil
}

// MountAudit serves the audit search (docs/audit.md) at /audit/ on adm,
// reading the audit stream over nc (a connection of the audit identity:
// [ConnectAudit]), when cfg's audit trail is on; it does nothing
// otherwise, and logs why when nc is nil (no audit credentials). Every
// role's admin listener serves it, so an operator can search from any
// process, with an audit or admin credential only (admin.RuleAudit,
// loopback included).
func MountAudit(adm *admin.Server, cfg *config.File, nc *nats.Conn, log *slog.Logger) error {
	if adm == nil || !cfg.Audit.On() {
		return nil
	}
	if nc == nil {
		log.Info("audit search not served: no audit identity credentials (nats.audit_creds, or a creds directory with audit.creds)")
		return nil
	}
	srch, err := audit.NewSearcher(nc, cfg.Audit.StreamName())
	if err != nil {
		return err
	}
	adm.Mount("/audit/", admin.RuleAudit, audit.NewHandler(srch, log))
	return nil
}

// PrintConfig writes the effective config as YAML, with the values of
// upstream environment variables, tracing export headers, the user
// information of NATS and upstream URLs and upstream URLs' queries (where
// secrets live) redacted. API keys and admin keys print as their source
// (key_env, key_file): the keys themselves are not in the File's
// printable fields.
func PrintConfig(w io.Writer, cfg *config.File) int {
	c := *cfg
	c.Tracing = cfg.Tracing.Redacted()
	c.Upstreams = make([]config.Upstream, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		if len(u.Env) > 0 {
			env := make(map[string]string, len(u.Env))
			for k := range u.Env {
				env[k] = "<redacted>"
			}
			u.Env = env
		}
		if u.URL != "" {
			u.URL = config.RedactHTTPURL(u.URL)
		}
		c.Upstreams[i] = u
	}
	b, err := yaml.Marshal(&c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, _ = w.Write(b)
	return 0
}
