// Package config loads Switchyard's YAML configuration file, shared by every
// role: each role takes the keys that concern it. Keys are snake_case and
// unknown keys are rejected. Sources, lowest precedence first: defaults, the
// file, SWITCHYARD_* environment variables, then flags (applied by each
// command's main).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/publicurl"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Duration is a time.Duration that parses from strings such as "5s".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	// A bare number ("30", "0") is not a duration: yaml would hand it over
	// as a string, so check the resolved tag, not just Decode.
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Decode(&s) != nil {
		return fmt.Errorf("line %d: duration must be a string like \"5s\"", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML prints the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MaxRouteCacheTTL bounds edge.route_cache_ttl: a route grant's token
// is valid that long plus clock skew, also after a policy change.
const MaxRouteCacheTTL = time.Minute

// File is the whole configuration file.
type File struct {
	// NATS is how the roles connect to NATS (multi-process mode): a URL,
	// or a mapping with credentials and TLS files (see NATSFile). Default
	// nats://127.0.0.1:4222; ignored by `switchyard dev`.
	NATS NATSFile `yaml:"nats"`
	// Listen is the edge's HTTP address. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// PageSize is the number of items per page of merged lists. Default 100.
	PageSize int `yaml:"page_size"`
	// NameSeparator joins upstream and tool names ("<upstream>__<tool>").
	// Default "__". It may use only [A-Za-z0-9_-].
	NameSeparator string `yaml:"name_separator"`
	// CallTimeout bounds one call end to end. Default 60s.
	CallTimeout Duration `yaml:"call_timeout"`
	// SessionTimeout closes client sessions idle this long. Default 30m; "0s" never.
	SessionTimeout *Duration `yaml:"session_timeout"`
	// MaxRequestBodyBytes bounds one HTTP request body at the edge. Default 4 MiB.
	MaxRequestBodyBytes int64 `yaml:"max_request_body_bytes"`
	// MaxResultBytes bounds one reassembled result at the edge. Default 64 MiB.
	MaxResultBytes int64 `yaml:"max_result_bytes"`
	// JSONResponse makes the edge answer POSTs with application/json instead
	// of an SSE stream (non-response messages then go to the GET stream).
	JSONResponse bool `yaml:"json_response"`

	// Auth is the edge's authentication: JWT issuers and the protected
	// resource metadata (see AuthFile).
	Auth AuthFile `yaml:"auth"`

	Edge   EdgeFile   `yaml:"edge"`
	Worker WorkerFile `yaml:"worker"`
	// Tasks is how task ids are sealed (TasksFile).
	Tasks TasksFile `yaml:"tasks"`

	// Admin is the admin listener: /metrics, /healthz, /readyz and the
	// handlers other components mount (the audit search), and the
	// credentials it accepts (AdminFile; docs/observability.md). Each
	// role process serves its own; `switchyard dev` and `switchyard run`
	// serve one for all the roles they run. Written as the address alone
	// (`admin: 127.0.0.1:9090`) or as a mapping. No address: no admin
	// listener (the default). Env SWITCHYARD_ADMIN (the address),
	// SWITCHYARD_ADMIN_KEY, SWITCHYARD_ADMIN_KEY_FILE,
	// SWITCHYARD_ADMIN_INSECURE; flag --admin (the address).
	Admin AdminFile `yaml:"admin"`
	// Metrics are the metric options.
	Metrics MetricsFile `yaml:"metrics"`
	// Tracing is the OpenTelemetry tracing section, read by the edge,
	// router and worker (docs/tracing.md). Off by default. Env
	// SWITCHYARD_TRACING_ENABLED, _ENDPOINT, _PROTOCOL, _SAMPLE_RATIO and
	// _HEADERS (k1=v1,k2=v2, values URL-encoded; where export secrets
	// belong). Header values are printed redacted.
	Tracing trace.Config `yaml:"tracing"`
	// Audit is the audit trail (docs/audit.md): on by default.
	Audit AuditFile `yaml:"audit"`

	Upstreams []Upstream `yaml:"upstreams"`

	// Tenants are seeded into KV switchyard_tenants by tenancy-svc, which
	// then owns them (see docs/tenancy.md). Absent (nil): one tenant,
	// [DefaultTenant], anonymous, seeing every upstream with default
	// allow, which is the single-tenant gateway. An explicit empty list
	// seeds none (tenants then come only from the admin endpoints).
	Tenants []tenancy.Tenant `yaml:"tenants"`
	// APIKeys are existing API keys to seed into KV switchyard_apikeys
	// (hash only). Empty: none.
	APIKeys []APIKey `yaml:"api_keys"`

	// envErrs are SWITCHYARD_* values applyEnv could not parse, reported
	// by Validate with the file's problems (never with the value: it may
	// be a secret).
	envErrs []error
}

// APIKey is one existing API key to seed. The plaintext key never appears
// in the file: it is read at [Load] from the environment variable KeyEnv
// or from the file KeyFile (exactly one of them; surrounding whitespace
// trimmed) and only its hash is stored.
//
// Only tenancy-svc needs the key, so only it needs the variable or file:
// Validate does not report a key that is absent (other roles load the
// same file, and a worker passes its environment on to the stdio servers
// it spawns, so the secret should not be in theirs); [APIKey.Record]
// does. A key that is present but malformed is a Validate error.
type APIKey struct {
	// Tenant the key authenticates for: a configured tenant.
	Tenant string `yaml:"tenant"`
	// Principal the key authenticates as (1-256 bytes, no control characters).
	Principal string `yaml:"principal"`
	// KeyEnv names the environment variable holding the key.
	KeyEnv string `yaml:"key_env"`
	// KeyFile is a file holding the key.
	KeyFile string `yaml:"key_file"`

	key    string // the plaintext, read by Load; never printed
	keyErr error  // a problem Validate reports: no source, two sources
	absent error  // the variable is unset or the file unreadable: only Record reports it
}

// Record returns the record to store for k: its id and hash (never the
// plaintext), tenant and principal, created at created. It fails, naming
// KeyEnv or KeyFile but never showing key material, if the key could not
// be read (the variable is unset, the file unreadable) or is not a key
// (wrapping apikey.ErrMalformed).
func (k *APIKey) Record(created time.Time) (apikey.Record, error) {
	switch {
	case k.keyErr != nil:
		return apikey.Record{}, k.keyErr
	case k.absent != nil:
		return apikey.Record{}, k.absent
	case k.key == "":
		return apikey.Record{}, errors.New("key not loaded")
	}
	r, err := apikey.NewRecord(k.key, created)
	if err != nil {
		return apikey.Record{}, fmt.Errorf("%s: %w", k.source(), err)
	}
	r.Tenant, r.Principal = k.Tenant, k.Principal
	return r, nil
}

// SetKey sets the plaintext key, as Load does from KeyEnv or KeyFile; for
// callers that build a File without Load.
func (k *APIKey) SetKey(key string) { k.key, k.keyErr, k.absent = key, nil, nil }

// Format prints k's tenant, principal and source for every verb (%v,
// %+v, %#v, %s), never the key it holds.
func (k APIKey) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "{tenant:%s principal:%s key_env:%s key_file:%s}", k.Tenant, k.Principal, k.KeyEnv, k.KeyFile)
}

// source says where the key comes from, for messages (never the key).
func (k *APIKey) source() string {
	if k.KeyEnv != "" {
		return "key_env " + k.KeyEnv
	}
	return "key_file " + k.KeyFile
}

// DefaultTenant is the name of the tenant seeded when the configuration
// has no tenants key: the gateway's single tenant before tenancy.
const DefaultTenant = "default"

// DefaultTenants returns the tenants seeded when none are configured: one
// tenant [DefaultTenant], anonymous, every upstream, default allow.
func DefaultTenants() []tenancy.Tenant {
	return []tenancy.Tenant{{
		Name:      DefaultTenant,
		Anonymous: true,
		Policy:    policy.Spec{AllUpstreams: true, Default: policy.Allow},
	}}
}

// EdgeFile holds per-edge settings.
type EdgeFile struct {
	// ID names this edge in session ids and subjects (a slug). Default: random.
	ID string `yaml:"id"`
	// RouteCacheTTL is how long the edge sends a tool's calls straight to
	// a worker on a router's route grant (edge.Config.RouteCacheTTL).
	// Default 1s; "0s": off, every call goes through a router.
	RouteCacheTTL *Duration `yaml:"route_cache_ttl"`
	// TrustedProxies are the peers, besides loopback ones (always
	// trusted), whose X-Forwarded-Proto, X-Forwarded-Host,
	// X-Forwarded-Prefix and Forwarded headers name the URL clients reach
	// the gateway at: IP addresses or CIDR prefixes ("10.0.0.0/8",
	// "192.168.1.10"). Empty: loopback peers only. auth.public_url, when
	// set, wins over any header (internal/publicurl).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// AllowedOrigins are the browser origins (the Origin header) the edge
	// serves, with CORS: exact origins, "*" patterns
	// ("https://*.example.com", "http://localhost:*"), or "*" for all
	// (publicurl.Origins). A request from another origin gets 403; one
	// without an Origin (not from a browser) is served. Empty: a loopback
	// listener serves loopback origins, any other listener only
	// auth.public_url's origin.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// a client connection (edge.Config, docs/limits.md): the header's
	// arrival (default 10s), the body's (30s), each write to the client
	// (30s), a keep-alive connection's idle time (120s). "0s": none.
	ReadHeaderTimeout *Duration `yaml:"read_header_timeout"`
	ReadTimeout       *Duration `yaml:"read_timeout"`
	WriteTimeout      *Duration `yaml:"write_timeout"`
	IdleTimeout       *Duration `yaml:"idle_timeout"`
	// MaxConnections caps the edge's open client connections (default:
	// three quarters of the open-file limit, at most 16,384);
	// MaxSessions its stateful sessions (10,000); MaxTenantSessions one
	// tenant's sessions on it (10,000). 0: no cap.
	// SessionEvictAfter drops from an edge's memory a session idle that
	// long on it (any edge adopts it again on its next request). Default
	// 2m; "0s": never.
	SessionEvictAfter *Duration `yaml:"session_evict_after"`
	// DrainDelay is how long a stopping edge keeps serving, not ready,
	// before it closes its listener, so that a load balancer's health
	// check sees it leave first. Default none.
	DrainDelay        *Duration `yaml:"drain_delay"`
	MaxConnections    *int      `yaml:"max_connections"`
	MaxSessions       *int      `yaml:"max_sessions"`
	MaxTenantSessions *int      `yaml:"max_tenant_sessions"`
}

// TrustedProxyPrefixes returns TrustedProxies parsed; entries that do
// not parse (which Validate reports) are left out.
func (e *EdgeFile) TrustedProxyPrefixes() []netip.Prefix {
	p, _ := publicurl.ParseTrusted(e.TrustedProxies)
	return p
}

// Origins returns AllowedOrigins parsed; nil when none are set (or they
// do not parse, which Validate reports).
func (e *EdgeFile) Origins() *publicurl.Origins {
	if len(e.AllowedOrigins) == 0 {
		return nil
	}
	o, err := publicurl.ParseOrigins(e.AllowedOrigins)
	if err != nil {
		return nil
	}
	return o
}

// MetricsFile holds the metric options.
type MetricsFile struct {
	// TenantLabels turns on per-tenant series
	// (switchyard_edge_tenant_requests_total{tenant,outcome}). Default
	// false: tenant is never a label.
	TenantLabels bool `yaml:"tenant_labels"`
	// TenantLabelsMax bounds the tenant label: while more tenants than
	// this exist the series are labelled tenant="_other". 0: 100.
	TenantLabelsMax int `yaml:"tenant_labels_max"`
}

// MaxTenantLabels is the edge's tenant-label bound: 0 when tenant labels
// are off.
func (m MetricsFile) MaxTenantLabels() int {
	switch {
	case !m.TenantLabels:
		return 0
	case m.TenantLabelsMax == 0:
		return 100
	}
	return m.TenantLabelsMax
}

// WorkerFile holds per-worker settings.
type WorkerFile struct {
	// ID names this worker in subjects (a slug). Default: random.
	ID string `yaml:"id"`
	// Upstreams lists the upstreams this worker serves. Empty: all of them.
	Upstreams []string `yaml:"upstreams"`
	// HeartbeatInterval is how often the worker announces itself. Default 500ms.
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
}

// Upstream is one upstream MCP server.
type Upstream struct {
	// Name is a slug ([a-z0-9-], no "__"): the namespace of its tools.
	Name string `yaml:"name"`
	// URL of a streamable HTTP (or, with transport: sse, legacy SSE) server.
	URL string `yaml:"url"`
	// Transport is "streamable" (default with url) or "sse"; "stdio" with command.
	Transport string `yaml:"transport"`
	// Command is the argv of a stdio server that the worker spawns.
	Command []string `yaml:"command"`
	// Env is a stdio server's environment, beside a minimal base (PATH,
	// HOME, LANG, TZ, ...: docs/sandbox.md); it never gets the worker's
	// other variables.
	Env map[string]string `yaml:"env"`
	// InheritEnv names the worker's environment variables a stdio server
	// gets as they are (a proxy setting, say); Env wins over them.
	InheritEnv []string `yaml:"inherit_env"`
	// Sandbox confines a stdio server's processes (docs/sandbox.md).
	Sandbox *SandboxFile `yaml:"sandbox,omitempty"`
	// Processes is how many processes of a stdio server each worker runs. Default 1.
	Processes int `yaml:"processes"`
	// CallTimeout bounds one call to this upstream; default: the global call_timeout.
	CallTimeout Duration `yaml:"call_timeout"`
	// MaxMessageBytes bounds one message (one line) a stdio server writes,
	// in bytes; a response over it fails only its call, -32065, and the
	// process goes on. Default: max_result_bytes.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// Auth is how workers authenticate to an HTTP upstream, and whether a
	// client's Authorization passes through; nil: no credentials, and a
	// client's Authorization is never sent (docs/upstream-auth.md).
	Auth *UpstreamAuth `yaml:"auth,omitempty"`
}

// Defaults.
const (
	DefaultNATS                = "nats://127.0.0.1:4222"
	DefaultListen              = "127.0.0.1:8080"
	DefaultPageSize            = 100
	DefaultNameSeparator       = "__"
	DefaultCallTimeout         = 60 * time.Second
	DefaultSessionTimeout      = 30 * time.Minute
	DefaultMaxRequestBodyBytes = 4 << 20
	DefaultMaxResultBytes      = 64 << 20
	DefaultHeartbeatInterval   = 500 * time.Millisecond
)

// Load reads, decodes (strictly), applies the environment, fills defaults
// and validates the file at path. An empty path gives the defaults with the
// environment applied. Every problem is reported, naming the field.
func Load(path string) (*File, error) {
	f := &File{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := Parse(data, f); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	f.applyEnv(os.Getenv)
	f.readKeys(os.Getenv, os.ReadFile)
	f.fillDefaults()
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

// Parse decodes YAML into f, rejecting unknown keys.
func Parse(data []byte, f *File) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	// A tenants key with no entries (all commented out: YAML null) means
	// no tenants, as tenants: [] does; only a file without the key gets
	// the default tenant, which is anonymous and sees everything.
	if f.Tenants == nil {
		var keys map[string]any
		if yaml.Unmarshal(data, &keys) == nil {
			if _, present := keys["tenants"]; present {
				f.Tenants = []tenancy.Tenant{}
			}
		}
	}
	return nil
}

// applyEnv overrides settings from SWITCHYARD_* variables.
func (f *File) applyEnv(getenv func(string) string) {
	f.NATS.applyEnv(getenv)
	if v := getenv("SWITCHYARD_LISTEN"); v != "" {
		f.Listen = v
	}
	f.applyAdminEnv(getenv)
	if v := getenv(EnvTaskKeyFile); v != "" {
		f.Tasks.KeyFile = v
	}
	if v := getenv("SWITCHYARD_EDGE_ID"); v != "" {
		f.Edge.ID = v
	}
	if v := getenv("SWITCHYARD_WORKER_ID"); v != "" {
		f.Worker.ID = v
	}
	if v := getenv("SWITCHYARD_WORKER_UPSTREAMS"); v != "" {
		f.Worker.Upstreams = strings.Split(v, ",")
	}
	f.applyTracingEnv(getenv)
	f.applyAuditEnv(getenv)
}

// applyTracingEnv overrides the tracing section from
// SWITCHYARD_TRACING_*; unparsable values are kept in f.envErrs.
func (f *File) applyTracingEnv(getenv func(string) string) {
	t := &f.Tracing
	if v := getenv("SWITCHYARD_TRACING_ENABLED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("SWITCHYARD_TRACING_ENABLED: %q is not true or false", v))
		} else {
			t.Enabled = b
		}
	}
	if v := getenv("SWITCHYARD_TRACING_ENDPOINT"); v != "" {
		t.Endpoint = v
	}
	if v := getenv("SWITCHYARD_TRACING_PROTOCOL"); v != "" {
		t.Protocol = v
	}
	if v := getenv("SWITCHYARD_TRACING_SAMPLE_RATIO"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("SWITCHYARD_TRACING_SAMPLE_RATIO: %q is not a number", v))
		} else {
			t.SampleRatio = r
		}
	}
	if v := getenv("SWITCHYARD_TRACING_HEADERS"); v != "" {
		h, err := trace.ParseHeaders(v)
		if err != nil {
			// ParseHeaders names the entry, never its value.
			f.envErrs = append(f.envErrs, fmt.Errorf("SWITCHYARD_TRACING_HEADERS: %w", err))
		} else {
			// The environment's headers add to the file's and win on a
			// name both set.
			if t.Headers == nil {
				t.Headers = make(map[string]string, len(h))
			}
			maps.Copy(t.Headers, h)
		}
	}
}

// readKeys reads each API key's plaintext from its variable or file. A
// failure is kept for Validate to report with the others.
func (f *File) readKeys(getenv func(string) string, readFile func(string) ([]byte, error)) {
	for i := range f.APIKeys {
		k := &f.APIKeys[i]
		k.key, k.keyErr, k.absent = readKey(k.KeyEnv, k.KeyFile, getenv, readFile)
	}
	for i := range f.Admin.Keys {
		k := &f.Admin.Keys[i]
		k.key, k.keyErr, k.absent = readKey(k.KeyEnv, k.KeyFile, getenv, readFile)
	}
}

// readKey reads a key from the variable env or the file file (exactly
// one of them; surrounding whitespace trimmed). keyErr is a problem of
// the configuration (no source, two sources); absent says the variable is
// unset or the file unreadable or empty. Neither quotes the key.
func readKey(env, file string, getenv func(string) string, readFile func(string) ([]byte, error)) (key string, keyErr, absent error) {
	switch {
	case env != "" && file != "":
		keyErr = errors.New("key_env and key_file: set only one")
	case env != "":
		if key = strings.TrimSpace(getenv(env)); key == "" {
			absent = fmt.Errorf("key_env: variable %s is not set", env)
		}
	case file != "":
		b, err := readFile(file)
		if err != nil {
			// The *PathError names the file and the reason, not its content.
			return "", nil, fmt.Errorf("key_file: %w", err)
		}
		if key = strings.TrimSpace(string(b)); key == "" {
			absent = fmt.Errorf("key_file: %s is empty", file)
		}
	default:
		keyErr = errors.New("key_env or key_file: required")
	}
	return key, keyErr, absent
}

func (f *File) fillDefaults() {
	if f.Tenants == nil {
		f.Tenants = DefaultTenants()
	}
	if f.NATS.URL == "" {
		f.NATS.URL = DefaultNATS
	}
	if f.Listen == "" {
		f.Listen = DefaultListen
	}
	if f.PageSize == 0 {
		f.PageSize = DefaultPageSize
	}
	if f.NameSeparator == "" {
		f.NameSeparator = DefaultNameSeparator
	}
	if f.CallTimeout == 0 {
		f.CallTimeout = Duration(DefaultCallTimeout)
	}
	if f.SessionTimeout == nil {
		d := Duration(DefaultSessionTimeout)
		f.SessionTimeout = &d
	}
	if f.MaxRequestBodyBytes == 0 {
		f.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if f.MaxResultBytes == 0 {
		f.MaxResultBytes = DefaultMaxResultBytes
	}
	if f.Worker.HeartbeatInterval == 0 {
		f.Worker.HeartbeatInterval = Duration(DefaultHeartbeatInterval)
	}
	for i := range f.Upstreams {
		u := &f.Upstreams[i]
		if u.Transport == "" {
			if len(u.Command) > 0 {
				u.Transport = proto.TransportStdio
			} else {
				u.Transport = proto.TransportStreamable
			}
		}
		if u.Processes == 0 {
			u.Processes = 1
		}
	}
}

// Validate reports every problem in f, joined.
func (f *File) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if f.PageSize < 1 {
		bad("page_size: must be at least 1, got %d", f.PageSize)
	}
	errs = append(errs, f.NATS.validate()...)
	for _, c := range f.NameSeparator {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			bad("name_separator: %q may use only [A-Za-z0-9_-]", f.NameSeparator)
			break
		}
	}
	if f.CallTimeout < 0 {
		bad("call_timeout: must not be negative")
	}
	if f.SessionTimeout != nil && *f.SessionTimeout < 0 {
		bad(`session_timeout: must not be negative ("0s": never)`)
	}
	for _, d := range []struct {
		name string
		v    *Duration
	}{{"read_header_timeout", f.Edge.ReadHeaderTimeout}, {"read_timeout", f.Edge.ReadTimeout},
		{"write_timeout", f.Edge.WriteTimeout}, {"idle_timeout", f.Edge.IdleTimeout}, {"session_evict_after", f.Edge.SessionEvictAfter},
		{"drain_delay", f.Edge.DrainDelay}} {
		if d.v != nil && *d.v < 0 {
			bad("edge.%s: must not be negative", d.name)
		}
	}
	for _, n := range []struct {
		name string
		v    *int
	}{{"max_connections", f.Edge.MaxConnections}, {"max_sessions", f.Edge.MaxSessions}, {"max_tenant_sessions", f.Edge.MaxTenantSessions}} {
		if n.v != nil && *n.v < 0 {
			bad("edge.%s: must not be negative (0: no cap)", n.name)
		}
	}
	if f.Edge.RouteCacheTTL != nil && *f.Edge.RouteCacheTTL < 0 {
		bad(`edge.route_cache_ttl: must not be negative ("0s": off)`)
	}
	if f.Edge.RouteCacheTTL != nil && time.Duration(*f.Edge.RouteCacheTTL) > MaxRouteCacheTTL {
		// A grant's token outlives a policy change by this much at a
		// worker (docs/security.md): keep it short.
		bad("edge.route_cache_ttl: at most %v", MaxRouteCacheTTL)
	}
	for i, e := range f.Edge.TrustedProxies {
		if _, err := publicurl.ParseTrusted([]string{e}); err != nil {
			bad("edge.trusted_proxies[%d]: %q is not an IP address or CIDR prefix", i, e)
		}
	}
	if _, err := publicurl.ParseOrigins(f.Edge.AllowedOrigins); err != nil {
		bad("edge.allowed_origins: %v", err)
	}
	if f.MaxRequestBodyBytes < 0 || f.MaxResultBytes < 0 {
		bad("max_request_body_bytes, max_result_bytes: must not be negative")
	}
	errs = append(errs, f.validateAdmin()...)
	if f.Metrics.TenantLabelsMax < 0 {
		bad("metrics.tenant_labels_max: must not be negative")
	}
	if f.Edge.ID != "" && !proto.ValidSlug(f.Edge.ID) {
		bad("edge.id: %q is not a slug ([a-z0-9-])", f.Edge.ID)
	}
	if f.Worker.ID != "" && !proto.ValidSlug(f.Worker.ID) {
		bad("worker.id: %q is not a slug ([a-z0-9-])", f.Worker.ID)
	}
	seen := map[string]bool{}
	for i, u := range f.Upstreams {
		errs = append(errs, u.validate(i, seen)...)
	}
	for _, n := range f.Worker.Upstreams {
		if !seen[n] {
			bad("worker.upstreams: %q is not a configured upstream", n)
		}
	}
	errs = append(errs, f.validateTenants(seen)...)
	errs = append(errs, f.validateAdminKeys()...)
	tenants := make(map[string]bool, len(f.Tenants))
	for _, t := range f.Tenants {
		tenants[t.Name] = true
	}
	errs = append(errs, f.Audit.validate(tenants)...)
	errs = append(errs, f.Auth.validate()...)
	if err := f.Tracing.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("tracing: %w", err))
	}
	errs = append(errs, f.envErrs...)
	return errors.Join(errs...)
}

// validateTenants checks the tenants (each valid, unique, at most one
// anonymous, policies naming configured upstreams) and the API keys
// (known tenant, a principal, one key source, a key that parses if it
// could be read, no key twice). upstreams holds the configured upstream
// names. Messages never include a key.
func (f *File) validateTenants(upstreams map[string]bool) []error {
	var errs []error
	if err := tenancy.CheckTenants(f.Tenants); err != nil {
		errs = append(errs, err)
	}
	tenants := make(map[string]bool, len(f.Tenants))
	for i, t := range f.Tenants {
		tenants[t.Name] = true
		for _, u := range t.Policy.Upstreams {
			if u != "" && !upstreams[u] {
				errs = append(errs, fmt.Errorf("tenants[%d] (%s): policy: upstream %q is not a configured upstream", i, t.Name, u))
			}
		}
	}
	ids := map[string]int{}
	for i := range f.APIKeys {
		k := &f.APIKeys[i]
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("api_keys[%d] (%s/%s): "+format, append([]any{i, k.Tenant, k.Principal}, a...)...))
		}
		if !tenants[k.Tenant] {
			bad("tenant: %q is not a configured tenant", k.Tenant)
		}
		if err := tenancy.CheckPrincipal(k.Principal); err != nil {
			bad("%v", err)
		}
		switch {
		case k.keyErr != nil:
			bad("%v", k.keyErr)
		case k.key == "":
			// Absent here: only tenancy-svc needs it (APIKey.Record).
		default:
			id, _, ok := apikey.Parse(k.key)
			if !ok {
				bad("%s: not a Switchyard API key (%s...)", k.source(), apikey.Prefix)
				break
			}
			if j, dup := ids[id]; dup {
				bad("%s: the same key as api_keys[%d]", k.source(), j)
			}
			ids[id] = i
		}
	}
	return errs
}

func (u Upstream) validate(i int, seen map[string]bool) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("upstreams[%d] (%s): "+format, append([]any{i, u.Name}, a...)...))
	}
	switch {
	case !proto.ValidSlug(u.Name) || strings.Contains(u.Name, "__"):
		bad("name: must be a slug of [a-z0-9-] without \"__\", 1-63 characters")
	case seen[u.Name]:
		bad("name: duplicate")
	}
	seen[u.Name] = true
	switch u.Transport {
	case proto.TransportStreamable, proto.TransportSSE:
		if u.URL == "" {
			bad("url: required for transport %q", u.Transport)
		} else if !strings.HasPrefix(u.URL, "http://") && !strings.HasPrefix(u.URL, "https://") {
			bad("url: %q must be http:// or https://", u.URL)
		}
		if len(u.Command) > 0 {
			bad("command: not allowed with url")
		}
	case proto.TransportStdio:
		if len(u.Command) == 0 {
			bad("command: required for transport stdio")
		}
		if u.URL != "" {
			bad("url: not allowed with command")
		}
	default:
		bad("transport: %q is not one of streamable, sse, stdio", u.Transport)
	}
	if u.Processes < 0 {
		bad("processes: must be positive")
	}
	if u.CallTimeout < 0 {
		bad("call_timeout: must not be negative")
	}
	if u.Sandbox != nil && u.Transport != proto.TransportStdio {
		bad("sandbox: only for a stdio upstream")
	}
	for _, err := range u.Sandbox.check() {
		bad("sandbox.%v", err)
	}
	if len(u.InheritEnv) > 0 && u.Transport != proto.TransportStdio {
		bad("inherit_env: only for a stdio upstream")
	}
	for _, name := range u.InheritEnv {
		if name == "" || strings.ContainsAny(name, "= \x00") {
			bad("inherit_env: %q is not a variable name", name)
		}
	}
	switch {
	case u.MaxMessageBytes < 0:
		bad("max_message_bytes: must not be negative")
	case u.MaxMessageBytes > 0 && u.Transport != proto.TransportStdio:
		bad("max_message_bytes: only for a stdio upstream (an HTTP upstream's messages are bounded by max_result_bytes)")
	case u.MaxMessageBytes > math.MaxInt32:
		bad("max_message_bytes: at most %d", math.MaxInt32)
	}
	for _, err := range u.checkAuth() {
		bad("%v", err)
	}
	return errs
}

// Spec converts u to its catalog entry.
func (u Upstream) Spec() proto.UpstreamSpec {
	return proto.UpstreamSpec{
		Name: u.Name, Transport: u.Transport, URL: u.URL,
		Command: u.Command, Env: u.Env, InheritEnv: u.InheritEnv, Processes: u.Processes, Sandbox: u.Sandbox.Spec(),
		CallTimeoutMs:   time.Duration(u.CallTimeout).Milliseconds(),
		MaxMessageBytes: u.MaxMessageBytes,
		Auth:            u.Auth.Spec(),
	}
}
