package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-mcp/switchyard/proto"
)

// envVars are every variable applyEnv reads.
var envVars = []string{
	"SWITCHYARD_NATS", "SWITCHYARD_LISTEN", "SWITCHYARD_EDGE_ID",
	"SWITCHYARD_WORKER_ID", "SWITCHYARD_WORKER_UPSTREAMS", "SWITCHYARD_ADMIN",
	"SWITCHYARD_TRACING_ENABLED", "SWITCHYARD_TRACING_ENDPOINT", "SWITCHYARD_TRACING_PROTOCOL",
	"SWITCHYARD_TRACING_SAMPLE_RATIO", "SWITCHYARD_TRACING_HEADERS", "SWITCHYARD_AUDIT_ENABLED",
	"SWITCHYARD_NATS_CREDS", "SWITCHYARD_NATS_CA", "SWITCHYARD_NATS_CERT", "SWITCHYARD_NATS_KEY", "SWITCHYARD_NATS_AUDIT_CREDS",
	"SWITCHYARD_ADMIN_KEY", "SWITCHYARD_ADMIN_KEY_FILE", "SWITCHYARD_ADMIN_INSECURE",
}

// clearEnv blanks the SWITCHYARD_* variables (blank means unset to
// applyEnv), so the runner's environment cannot leak into a test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range envVars {
		t.Setenv(k, "")
	}
}

// loadCase loads yaml as a file named after a table case, with only the
// env variables of SWITCHYARD_* set.
func loadCase(t *testing.T, dir, name, yaml string, env map[string]string) (*File, error) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(p)
}

// writeConfig writes body to a fresh file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "switchyard.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func dur(d time.Duration) *Duration { v := Duration(d); return &v }

func TestConfigLoadDefaults(t *testing.T) {
	clearEnv(t)
	defaults := File{
		NATS:                NATSFile{URL: DefaultNATS},
		Listen:              DefaultListen,
		PageSize:            DefaultPageSize,
		NameSeparator:       DefaultNameSeparator,
		CallTimeout:         Duration(DefaultCallTimeout),
		SessionTimeout:      dur(DefaultSessionTimeout),
		MaxRequestBodyBytes: DefaultMaxRequestBodyBytes,
		MaxResultBytes:      DefaultMaxResultBytes,
		Worker:              WorkerFile{HeartbeatInterval: Duration(DefaultHeartbeatInterval)},
		Tenants:             DefaultTenants(),
	}
	tests := []struct {
		name string
		body string
		none bool // load with an empty path
		want func() File
	}{
		{
			name: "empty path",
			none: true,
			want: func() File { return defaults },
		},
		{
			name: "empty file",
			body: "",
			want: func() File { return defaults },
		},
		{
			name: "upstream defaults",
			body: `
upstreams:
  - name: web
    url: https://example.com/mcp
  - name: fs
    command: [fs-server, --root, /]
    env: {A: "1"}
`,
			want: func() File {
				f := defaults
				f.Upstreams = []Upstream{
					{Name: "web", URL: "https://example.com/mcp", Transport: proto.TransportStreamable, Processes: 1},
					{Name: "fs", Command: []string{"fs-server", "--root", "/"}, Env: map[string]string{"A": "1"}, Transport: proto.TransportStdio, Processes: 1},
				}
				return f
			},
		},
		{
			name: "explicit values kept",
			body: `
nats: nats://bus:4222
listen: 0.0.0.0:9000
page_size: 7
name_separator: "--"
call_timeout: 5s
session_timeout: 0s
max_request_body_bytes: 1024
max_result_bytes: 2048
json_response: true
edge: {id: edge-1}
worker:
  id: worker-1
  upstreams: [legacy]
  heartbeat_interval: 250ms
upstreams:
  - name: legacy
    url: http://127.0.0.1:3000/sse
    transport: sse
    processes: 3
    call_timeout: 1m30s
`,
			want: func() File {
				return File{
					NATS: NATSFile{URL: "nats://bus:4222"}, Listen: "0.0.0.0:9000", PageSize: 7, NameSeparator: "--",
					CallTimeout: Duration(5 * time.Second), SessionTimeout: dur(0),
					MaxRequestBodyBytes: 1024, MaxResultBytes: 2048, JSONResponse: true,
					Edge:   EdgeFile{ID: "edge-1"},
					Worker: WorkerFile{ID: "worker-1", Upstreams: []string{"legacy"}, HeartbeatInterval: Duration(250 * time.Millisecond)},
					Upstreams: []Upstream{{
						Name: "legacy", URL: "http://127.0.0.1:3000/sse", Transport: proto.TransportSSE,
						Processes: 3, CallTimeout: Duration(90 * time.Second),
					}},
					Tenants: DefaultTenants(),
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if !tt.none {
				path = writeConfig(t, tt.body)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tt.want(), *got, cmpopts.IgnoreUnexported(File{})); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigLoadRejects(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		body string
		want []string // substrings of the error
	}{
		{
			name: "unknown top-level key",
			body: "listen: x\nlisten_addr: y\n",
			want: []string{"listen_addr"},
		},
		{
			name: "unknown upstream key",
			body: "upstreams:\n  - name: a\n    url: http://a\n    urll: http://b\n",
			want: []string{"urll"},
		},
		{
			name: "a sandbox with relative paths",
			body: "upstreams:\n  - name: a\n    command: [x]\n    sandbox:\n      workdir: srv\n      landlock: {read_only: [usr]}\n      limits: {memory_bytes: 1024}\n",
			want: []string{"sandbox.workdir:", "sandbox.landlock.read_only[0]:", "sandbox.limits.memory_bytes: 1024 is under 16 MiB"},
		},
		{
			name: "a sandbox on an HTTP upstream",
			body: "upstreams:\n  - name: a\n    url: http://a\n    sandbox: {workdir: /srv}\n",
			want: []string{"sandbox: only for a stdio upstream"},
		},
		{
			name: "token exchange with passthrough",
			body: "upstreams:\n  - name: a\n    url: http://a\n    auth:\n      passthrough: true\n      token_exchange: {token_url: https://idp/token, client_id: w}\n",
			want: []string{"token_exchange and passthrough: set only one"},
		},
		{
			name: "token exchange without a client id",
			body: "upstreams:\n  - name: a\n    url: http://a\n    auth:\n      token_exchange: {token_url: https://idp/token}\n",
			want: []string{"token_exchange.client_id: required"},
		},
		{
			name: "an allowed origin with a path",
			body: "edge:\n  allowed_origins: [\"https://app.example.com/x\"]\n",
			want: []string{"edge.allowed_origins:", "app.example.com/x"},
		},
		{
			name: "max_message_bytes on an HTTP upstream",
			body: "upstreams:\n  - name: a\n    url: http://a\n    max_message_bytes: 1024\n",
			want: []string{"upstreams[0] (a): max_message_bytes: only for a stdio upstream"},
		},
		{
			name: "negative max_message_bytes",
			body: "upstreams:\n  - name: a\n    command: [x]\n    max_message_bytes: -1\n",
			want: []string{"upstreams[0] (a): max_message_bytes: must not be negative"},
		},
		{
			name: "bad upstream name",
			body: "upstreams:\n  - name: Bad_Name\n    url: http://a\n",
			want: []string{"upstreams[0] (Bad_Name): name:"},
		},
		{
			name: "empty upstream name",
			body: "upstreams:\n  - url: http://a\n",
			want: []string{"upstreams[0] (): name:"},
		},
		{
			name: "duplicate upstream name",
			body: "upstreams:\n  - name: a\n    url: http://a\n  - name: a\n    url: http://b\n",
			want: []string{"upstreams[1] (a): name: duplicate"},
		},
		{
			name: "url and command",
			body: "upstreams:\n  - name: a\n    url: http://a\n    command: [x]\n",
			want: []string{"upstreams[0] (a): url: not allowed with command"},
		},
		{
			name: "url and command with http transport",
			body: "upstreams:\n  - name: a\n    transport: streamable\n    url: http://a\n    command: [x]\n",
			want: []string{"upstreams[0] (a): command: not allowed with url"},
		},
		{
			name: "neither url nor command",
			body: "upstreams:\n  - name: a\n",
			want: []string{"upstreams[0] (a): url: required"},
		},
		{
			name: "stdio without command",
			body: "upstreams:\n  - name: a\n    transport: stdio\n",
			want: []string{"upstreams[0] (a): command: required"},
		},
		{
			name: "url scheme",
			body: "upstreams:\n  - name: a\n    url: ftp://a\n",
			want: []string{"upstreams[0] (a): url:", "ftp://a"},
		},
		{
			name: "bad transport",
			body: "upstreams:\n  - name: a\n    url: http://a\n    transport: websocket\n",
			want: []string{"upstreams[0] (a): transport:", "websocket"},
		},
		{
			name: "negative processes",
			body: "upstreams:\n  - name: a\n    command: [x]\n    processes: -1\n",
			want: []string{"upstreams[0] (a): processes:"},
		},
		{
			name: "bad name_separator",
			body: "name_separator: \"::\"\n",
			want: []string{"name_separator:", `"::"`},
		},
		{
			name: "negative page_size",
			body: "page_size: -5\n",
			want: []string{"page_size:", "-5"},
		},
		{
			name: "negative call_timeout",
			body: "call_timeout: -1s\n",
			want: []string{"call_timeout:"},
		},
		{
			name: "negative session_timeout",
			body: "session_timeout: -5s\n",
			want: []string{"session_timeout:"},
		},
		{
			name: "negative edge timeouts and caps",
			body: "edge:\n  read_timeout: -1s\n  write_timeout: -2s\n  idle_timeout: -1s\n  read_header_timeout: -1s\n  max_connections: -1\n  max_sessions: -2\n  max_tenant_sessions: -3\n",
			want: []string{"edge.read_timeout:", "edge.write_timeout:", "edge.idle_timeout:", "edge.read_header_timeout:", "edge.max_connections:", "edge.max_sessions:", "edge.max_tenant_sessions:"},
		},
		{
			name: "negative edge.route_cache_ttl",
			body: "edge:\n  route_cache_ttl: -1s\n",
			want: []string{"edge.route_cache_ttl:"},
		},
		{
			name: "bad edge.trusted_proxies",
			body: "edge:\n  trusted_proxies: [10.0.0.0/8, proxy.internal, 10.0.0.0/40]\n",
			want: []string{`edge.trusted_proxies[1]: "proxy.internal"`, `edge.trusted_proxies[2]: "10.0.0.0/40"`},
		},
		{
			name: "negative byte limits",
			body: "max_result_bytes: -1\n",
			want: []string{"max_result_bytes"},
		},
		{
			name: "worker.upstreams names an unknown upstream",
			body: "worker:\n  upstreams: [ghost]\nupstreams:\n  - name: a\n    url: http://a\n",
			want: []string{"worker.upstreams:", `"ghost"`},
		},
		{
			name: "bad edge.id",
			body: "edge:\n  id: Edge.One\n",
			want: []string{"edge.id:", `"Edge.One"`},
		},
		{
			name: "bad worker.id",
			body: "worker:\n  id: -w\n",
			want: []string{"worker.id:", `"-w"`},
		},
		{
			name: "every problem in one error",
			body: `
page_size: -1
name_separator: "/"
edge: {id: "EDGE"}
worker: {upstreams: [nope]}
upstreams:
  - name: "x y"
    url: http://a
  - name: dup
    url: http://a
  - name: dup
    url: http://a
  - name: both
    url: http://a
    command: [x]
  - name: neither
  - name: tx
    url: http://a
    transport: grpc
`,
			want: []string{
				"page_size:", "name_separator:", "edge.id:", "worker.upstreams:",
				"upstreams[0] (x y): name:", "upstreams[2] (dup): name: duplicate",
				"upstreams[3] (both): url: not allowed", "upstreams[4] (neither): url: required",
				"upstreams[5] (tx): transport:",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(writeConfig(t, tt.body))
			if err == nil {
				t.Fatalf("Load accepted the file: %+v", f)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestConfigDuration(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name    string
		body    string
		want    time.Duration // call_timeout
		wantErr bool
	}{
		{name: "seconds", body: "call_timeout: 5s", want: 5 * time.Second},
		{name: "compound", body: "call_timeout: 1h2m3s", want: time.Hour + 2*time.Minute + 3*time.Second},
		{name: "quoted", body: `call_timeout: "250ms"`, want: 250 * time.Millisecond},
		{name: "empty value is the default", body: "call_timeout:", want: DefaultCallTimeout},
		{name: "integer", body: "call_timeout: 30", wantErr: true},
		{name: "zero integer", body: "call_timeout: 0", wantErr: true},
		{name: "float", body: "call_timeout: 1.5", wantErr: true},
		{name: "bool", body: "call_timeout: true", wantErr: true},
		{name: "no unit string", body: `call_timeout: "30"`, wantErr: true},
		{name: "garbage", body: "call_timeout: soon", wantErr: true},
		{name: "sequence", body: "call_timeout: [5s]", wantErr: true},
		{name: "mapping", body: "call_timeout: {s: 5}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(writeConfig(t, tt.body+"\n"))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Load accepted %q: call_timeout=%v", tt.body, time.Duration(f.CallTimeout))
				}
				if !strings.Contains(err.Error(), "line 1") {
					t.Errorf("error does not give the line: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := time.Duration(f.CallTimeout); got != tt.want {
				t.Errorf("call_timeout = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigDurationMarshal(t *testing.T) {
	got, err := Duration(90 * time.Second).MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	if got != "1m30s" {
		t.Errorf("MarshalYAML = %v, want 1m30s", got)
	}
}

func TestConfigEnv(t *testing.T) {
	const body = `
nats: nats://file:4222
listen: 127.0.0.1:1
edge: {id: file-edge}
worker: {id: file-worker, upstreams: [a]}
upstreams:
  - {name: a, url: "http://a"}
  - {name: b, url: "http://b"}
`
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, f *File)
		wantErr string
	}{
		{
			name: "none set keeps the file",
			check: func(t *testing.T, f *File) {
				if f.NATS.URL != "nats://file:4222" || f.Listen != "127.0.0.1:1" || f.Edge.ID != "file-edge" || f.Worker.ID != "file-worker" {
					t.Errorf("file values lost: %+v", f)
				}
			},
		},
		{
			name: "all overrides",
			env: map[string]string{
				"SWITCHYARD_NATS":             "nats://env:4222",
				"SWITCHYARD_LISTEN":           "0.0.0.0:8081",
				"SWITCHYARD_EDGE_ID":          "env-edge",
				"SWITCHYARD_WORKER_ID":        "env-worker",
				"SWITCHYARD_WORKER_UPSTREAMS": "b,a",
			},
			check: func(t *testing.T, f *File) {
				want := []string{f.NATS.URL, f.Listen, f.Edge.ID, f.Worker.ID}
				if diff := cmp.Diff([]string{"nats://env:4222", "0.0.0.0:8081", "env-edge", "env-worker"}, want); diff != "" {
					t.Errorf("overrides (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"b", "a"}, f.Worker.Upstreams); diff != "" {
					t.Errorf("worker.upstreams (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:    "overrides are validated",
			env:     map[string]string{"SWITCHYARD_EDGE_ID": "Not A Slug"},
			wantErr: "edge.id:",
		},
		{
			name:    "worker upstreams from env are validated",
			env:     map[string]string{"SWITCHYARD_WORKER_UPSTREAMS": "a,zzz"},
			wantErr: `worker.upstreams: "zzz"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			f, err := Load(writeConfig(t, body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, f)
		})
	}
}

func TestConfigEnvWithoutFile(t *testing.T) {
	clearEnv(t)
	t.Setenv("SWITCHYARD_NATS", "nats://only-env:4222")
	f, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if f.NATS.URL != "nats://only-env:4222" || f.Listen != DefaultListen {
		t.Errorf("Load(\"\") = nats %q listen %q, want env nats and default listen", f.NATS.URL, f.Listen)
	}
}

func TestConfigLoadMissingFile(t *testing.T) {
	clearEnv(t)
	p := filepath.Join(t.TempDir(), "absent.yaml")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("Load(missing) error = %v, want one naming the file", err)
	}
}

func TestConfigUpstreamSpec(t *testing.T) {
	tests := []struct {
		name string
		in   Upstream
		want proto.UpstreamSpec
	}{
		{
			name: "http",
			in:   Upstream{Name: "web", URL: "https://w/mcp", Transport: proto.TransportStreamable, Processes: 1},
			want: proto.UpstreamSpec{Name: "web", URL: "https://w/mcp", Transport: proto.TransportStreamable, Processes: 1},
		},
		{
			name: "stdio with timeout",
			in: Upstream{
				Name: "fs", Transport: proto.TransportStdio, Command: []string{"fs", "-v"},
				Env: map[string]string{"K": "V"}, Processes: 4, CallTimeout: Duration(1500 * time.Millisecond),
				MaxMessageBytes: 1 << 20,
			},
			want: proto.UpstreamSpec{
				Name: "fs", Transport: proto.TransportStdio, Command: []string{"fs", "-v"},
				Env: map[string]string{"K": "V"}, Processes: 4, CallTimeoutMs: 1500, MaxMessageBytes: 1 << 20,
			},
		},
		{
			name: "no timeout",
			in:   Upstream{Name: "x", Transport: proto.TransportSSE, URL: "http://x"},
			want: proto.UpstreamSpec{Name: "x", Transport: proto.TransportSSE, URL: "http://x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.in.Spec()); diff != "" {
				t.Errorf("Spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigExampleDevYAML(t *testing.T) {
	clearEnv(t)
	f, err := Load("../../examples/dev.yaml")
	if err != nil {
		t.Fatalf("examples/dev.yaml: %v", err)
	}
	if len(f.Upstreams) == 0 {
		t.Fatal("examples/dev.yaml: no upstreams")
	}
	for _, u := range f.Upstreams {
		if u.Transport == "" || u.Processes < 1 {
			t.Errorf("upstream %s: defaults not filled: %+v", u.Name, u)
		}
	}
}
