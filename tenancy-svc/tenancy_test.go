package tenancy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// grace is how long Run may take to return after its context ends.
const grace = 5 * time.Second

// running is a Service whose Run goroutine is under test control.
type running struct {
	svc    *Service
	cancel context.CancelFunc
	done   chan error
}

// start runs a tenancy service with cfg on a new connection to s.
func start(t *testing.T, s *server.Server, cfg Config) *running {
	t.Helper()
	svc, err := New(cfg, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and checks it returns nil within the grace period.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	begin := time.Now()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(grace):
		t.Fatalf("Run did not return within %v of cancel (waited %v)", grace, time.Since(begin))
	}
	if r.svc.Ready() {
		t.Error("Ready() still true after Run returned")
	}
}

func waitReady(t *testing.T, svc *Service) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !svc.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("service not Ready within 10s")
		}
		<-tick.C
	}
}

func bucket(t *testing.T, s *server.Server) jetstream.KeyValue {
	t.Helper()
	return kvOf(t, s, proto.BucketUpstreams)
}

// entry is one catalog key as read back from the bucket.
type entry struct {
	spec     proto.UpstreamSpec
	revision uint64
}

func catalog(t *testing.T, kv jetstream.KeyValue) map[string]entry {
	t.Helper()
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entry{}
	for k := range keys.Keys() {
		e, err := kv.Get(t.Context(), k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		var spec proto.UpstreamSpec
		if err := proto.Unmarshal(e.Value(), &spec); err != nil {
			t.Fatalf("key %s: not a msgpack UpstreamSpec: %v", k, err)
		}
		out[k] = entry{spec: spec, revision: e.Revision()}
	}
	return out
}

func specs(m map[string]entry) map[string]proto.UpstreamSpec {
	out := make(map[string]proto.UpstreamSpec, len(m))
	for k, e := range m {
		out[k] = e.spec
	}
	return out
}

func byName(us ...proto.UpstreamSpec) map[string]proto.UpstreamSpec {
	out := make(map[string]proto.UpstreamSpec, len(us))
	for _, u := range us {
		out[u.Name] = u
	}
	return out
}

var (
	httpA = proto.UpstreamSpec{Name: "a", Transport: proto.TransportStreamable, URL: "http://a/mcp", Processes: 1}
	sseB  = proto.UpstreamSpec{Name: "b", Transport: proto.TransportSSE, URL: "http://b/sse", Processes: 1, CallTimeoutMs: 1500}
	stdC  = proto.UpstreamSpec{
		Name: "c", Transport: proto.TransportStdio, Command: []string{"c-server", "--flag"},
		// Several keys: the encoding must be stable for the skip-unchanged check.
		Env:       map[string]string{"Z": "26", "A": "1", "M": "13", "Q": "17"},
		Processes: 2,
	}
)

func TestTenancySeed(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "several upstreams", cfg: Config{Upstreams: []proto.UpstreamSpec{httpA, sseB, stdC}}},
		{name: "one upstream", cfg: Config{Upstreams: []proto.UpstreamSpec{stdC}}},
		{name: "empty catalog", cfg: Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Start(t)
			r := start(t, s, tt.cfg)
			waitReady(t, r.svc)
			got := specs(catalog(t, bucket(t, s)))
			if diff := cmp.Diff(byName(tt.cfg.Upstreams...), got); diff != "" {
				t.Errorf("catalog (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTenancyReseed(t *testing.T) {
	changedB := sseB
	changedB.URL = "http://b2/sse"
	changedC := stdC
	changedC.Env = map[string]string{"A": "2"}
	d := proto.UpstreamSpec{Name: "d", Transport: proto.TransportStreamable, URL: "http://d/"}
	tests := []struct {
		name        string
		first       []proto.UpstreamSpec
		second      []proto.UpstreamSpec
		unchanged   []string // keys whose revision must stay the same
		rewritten   []string // keys whose revision must move on
		wantDeleted []string
	}{
		{
			name:      "same config writes nothing",
			first:     []proto.UpstreamSpec{httpA, sseB, stdC},
			second:    []proto.UpstreamSpec{stdC, httpA, sseB}, // order does not matter
			unchanged: []string{"a", "b", "c"},
		},
		{
			name:        "changed, removed and added",
			first:       []proto.UpstreamSpec{httpA, sseB, stdC},
			second:      []proto.UpstreamSpec{httpA, changedB, d},
			unchanged:   []string{"a"},
			rewritten:   []string{"b"},
			wantDeleted: []string{"c"},
		},
		{
			name:      "map value change is a change",
			first:     []proto.UpstreamSpec{stdC},
			second:    []proto.UpstreamSpec{changedC},
			rewritten: []string{"c"},
		},
		{
			name:        "everything removed",
			first:       []proto.UpstreamSpec{httpA, sseB},
			wantDeleted: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Start(t)
			kv := bucket(t, s)
			first := start(t, s, Config{Upstreams: tt.first})
			waitReady(t, first.svc)
			first.stop(t)
			before := catalog(t, kv)

			second := start(t, s, Config{Upstreams: tt.second})
			waitReady(t, second.svc)
			after := catalog(t, kv)

			if diff := cmp.Diff(byName(tt.second...), specs(after)); diff != "" {
				t.Errorf("catalog after the second seed (-want +got):\n%s", diff)
			}
			for _, k := range tt.unchanged {
				if before[k].revision != after[k].revision {
					t.Errorf("key %s rewritten although unchanged: revision %d -> %d", k, before[k].revision, after[k].revision)
				}
			}
			for _, k := range tt.rewritten {
				if after[k].revision <= before[k].revision {
					t.Errorf("key %s not rewritten: revision %d -> %d", k, before[k].revision, after[k].revision)
				}
			}
			for _, k := range tt.wantDeleted {
				if _, err := kv.Get(t.Context(), k); !errors.Is(err, jetstream.ErrKeyNotFound) {
					t.Errorf("key %s: Get error = %v, want ErrKeyNotFound", k, err)
				}
			}
		})
	}
}

func TestTenancyNew(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	tests := []struct {
		name    string
		names   []string
		wantErr string // "" for success; else a substring
	}{
		{name: "valid", names: []string{"a", "b-2", "x0"}},
		{name: "none", names: nil},
		{name: "empty name", names: []string{""}, wantErr: `""`},
		{name: "upper case", names: []string{"Web"}, wantErr: `"Web"`},
		{name: "underscore", names: []string{"a__b"}, wantErr: `"a__b"`},
		{name: "dot", names: []string{"a.b"}, wantErr: `"a.b"`},
		{name: "leading dash", names: []string{"-a"}, wantErr: `"-a"`},
		{name: "too long", names: []string{strings.Repeat("x", 64)}, wantErr: "invalid"},
		{name: "duplicate", names: []string{"a", "b", "a"}, wantErr: `"a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			for _, n := range tt.names {
				cfg.Upstreams = append(cfg.Upstreams, proto.UpstreamSpec{Name: n, Transport: proto.TransportStreamable, URL: "http://x"})
			}
			svc, err := New(cfg, nc, nil)
			if tt.wantErr == "" {
				if err != nil || svc == nil {
					t.Fatalf("New = %v, %v; want a service", svc, err)
				}
				if svc.Ready() {
					t.Error("Ready() before Run")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one mentioning %s", err, tt.wantErr)
			}
		})
	}
}

func TestTenancyRunStops(t *testing.T) {
	tests := []struct {
		name  string
		conn  func(t *testing.T) *nats.Conn
		ready bool // whether it gets to seed before the cancel
	}{
		{
			name:  "after seeding",
			conn:  func(t *testing.T) *nats.Conn { return natstest.Connect(t, natstest.Start(t)) },
			ready: true,
		},
		{
			name: "while JetStream is unreachable",
			conn: func(t *testing.T) *nats.Conn {
				nc := natstest.Connect(t, natstest.Start(t))
				nc.Close() // every seed attempt fails: Run keeps retrying
				return nc
			},
		},
		{
			name: "server without JetStream",
			conn: func(t *testing.T) *nats.Conn {
				opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
				s, err := server.NewServer(opts)
				if err != nil {
					t.Fatal(err)
				}
				go s.Start()
				if !s.ReadyForConnections(5 * time.Second) {
					t.Fatal("server not ready within 5s")
				}
				t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
				return natstest.Connect(t, s)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := New(Config{Upstreams: []proto.UpstreamSpec{httpA}}, tt.conn(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			r := &running{svc: svc, cancel: cancel, done: make(chan error, 1)}
			go func() { r.done <- svc.Run(ctx) }()
			if tt.ready {
				waitReady(t, svc)
			}
			r.stop(t)
		})
	}
}

func TestTenancyFromFile(t *testing.T) {
	f := &config.File{Upstreams: []config.Upstream{
		{Name: "a", URL: "http://a/mcp", Transport: proto.TransportStreamable, Processes: 1},
		{Name: "c", Command: []string{"c-server"}, Transport: proto.TransportStdio, Processes: 2, CallTimeout: config.Duration(2 * time.Second)},
	}}
	tests := []struct {
		name string
		in   *config.File
		want Config
	}{
		{
			name: "upstreams",
			in:   f,
			want: Config{
				Upstreams: []proto.UpstreamSpec{
					{Name: "a", URL: "http://a/mcp", Transport: proto.TransportStreamable, Processes: 1},
					{Name: "c", Command: []string{"c-server"}, Transport: proto.TransportStdio, Processes: 2, CallTimeoutMs: 2000},
				},
				Tenants: config.DefaultTenants(),
			},
		},
		{name: "none", in: &config.File{}, want: Config{Upstreams: []proto.UpstreamSpec{}, Tenants: config.DefaultTenants()}},
		{
			name: "no tenants on purpose",
			in:   &config.File{Tenants: []tenancy.Tenant{}},
			want: Config{Upstreams: []proto.UpstreamSpec{}, Tenants: []tenancy.Tenant{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromFile(tt.in)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Config{}, "Provision")); diff != "" {
				t.Errorf("FromFile (-want +got):\n%s", diff)
			}
			// Every bucket and secret, and the audit stream (on by default).
			if p := got.Provision; p == nil || len(p.KV) != len(proto.Buckets) || len(p.Secrets) != 2 ||
				len(p.Streams) != 1 || p.Streams[0].Name != proto.DefaultAuditStream {
				t.Errorf("FromFile plans %+v", p)
			}
		})
	}
}

// The names a service seeds are exactly those of its configuration.
func TestTenancySeedKeys(t *testing.T) {
	s := natstest.Start(t)
	r := start(t, s, Config{Upstreams: []proto.UpstreamSpec{stdC, httpA}})
	waitReady(t, r.svc)
	var got []string
	for k := range catalog(t, bucket(t, s)) {
		got = append(got, k)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"a", "c"}, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}
