package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/upstream"
)

// env is a worker under test on an embedded NATS server, driven through
// NATS like a router would.
type env struct {
	ns     *server.Server
	t      *testing.T
	nc     *nats.Conn // the test's own connection
	js     jetstream.JetStream
	specs  jetstream.KeyValue
	caller *bus.Caller
	svc    *Service
	stop   context.CancelFunc
	done   chan error

	mu  sync.Mutex
	hb  *proto.Heartbeat // guarded by mu: the latest heartbeat
	hbN int              // guarded by mu: heartbeats seen
	hbs []hbSeen         // guarded by mu: every heartbeat, in order
}

// hbSeen is one heartbeat as the test saw it.
type hbSeen struct {
	draining, bye bool
	at            time.Time
}

// startWorker seeds the catalog with specs and runs a worker "w1".
func startWorker(t *testing.T, cfg Config, specs ...proto.UpstreamSpec) *env {
	t.Helper()
	ns := provisiontest.Start(t)
	e := &env{t: t, ns: ns, nc: natstest.Connect(t, ns), done: make(chan error, 1)}
	var err error
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	e.specs, err = e.js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: proto.BucketUpstreams})
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		e.putSpec(sp)
	}
	e.caller = bus.NewCaller(e.nc, 0)
	if err := e.caller.Start(); err != nil {
		t.Fatal(err)
	}
	if cfg.ID == "" {
		cfg.ID = "w1"
	}
	hbSubj, _ := proto.EvtWorkerSubject(cfg.ID)
	if _, err := e.nc.Subscribe(hbSubj, e.onHeartbeat); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if os.Getenv("WORKER_TEST_LOG") == "" {
		log = nil
	}
	e.svc, err = New(cfg, natstest.Connect(t, ns), log)
	if err != nil {
		t.Fatal(err)
	}
	e.svc.tune = func(o *upstream.Options) {
		// The test processes speak the era their spec asks for; production
		// stdio sessions ask for 2025-11-25 (switchyard/integration covers it).
		o.StdioVersion = "latest"
		o.PingInterval, o.PingTimeout = 100*time.Millisecond, time.Second
		o.BackoffMin, o.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	e.stop = cancel
	go func() { e.done <- e.svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-e.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not return within 15s of cancel")
		}
	})
	eventually(t, 10*time.Second, "worker ready", func() bool { return e.svc.Ready() })
	return e
}

func (e *env) putSpec(sp proto.UpstreamSpec) {
	e.t.Helper()
	data, err := proto.Marshal(&sp)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.specs.Put(e.t.Context(), sp.Name, data); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) onHeartbeat(m *nats.Msg) {
	var hb proto.Heartbeat
	if proto.Unmarshal(m.Data, &hb) != nil {
		return
	}
	e.mu.Lock()
	e.hb = &hb
	e.hbN++
	e.hbs = append(e.hbs, hbSeen{hb.Draining, hb.Bye, time.Now()})
	e.mu.Unlock()
}

// state returns the upstream's state in the latest heartbeat.
func (e *env) state(name string) (proto.UpstreamState, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hb == nil {
		return proto.UpstreamState{}, false
	}
	for _, u := range e.hb.Upstreams {
		if u.Name == name {
			return u, true
		}
	}
	return proto.UpstreamState{}, false
}

func (e *env) lastHeartbeat() *proto.Heartbeat {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hb
}

// waitUp waits until a heartbeat reports the upstream up.
func (e *env) waitUp(name string) {
	e.t.Helper()
	eventually(e.t, 15*time.Second, "upstream "+name+" up", func() bool {
		s, ok := e.state(name)
		return ok && s.Up
	})
}

// waitPings waits until the upstream's pool session answered n pings and
// it is up. A transient failure in between (the SDK's legacy SSE server can
// refuse an initialize that races its GET stream on a loaded machine) is
// allowed: supervision reconnects, which is what is under test here.
func (e *env) waitPings(name string, n uint64) {
	e.t.Helper()
	eventually(e.t, 20*time.Second, fmt.Sprintf("%d pings of %s", n, name), func() bool {
		u := e.svc.mgr.get(name)
		return u != nil && u.State().Up && u.Pings() >= n
	})
}

// call sends req to the worker's pinned tools_call subject and decodes
// the reply.
func (e *env) call(req proto.Request) *proto.Reply {
	e.t.Helper()
	r, err := e.callErr(e.t.Context(), proto.OpToolsCall, req)
	if err != nil {
		e.t.Fatalf("call %s: %v", req.Name, err)
	}
	return r
}

func (e *env) callErr(ctx context.Context, op string, req proto.Request) (*proto.Reply, error) {
	data, err := proto.Marshal(&req)
	if err != nil {
		return nil, err
	}
	return e.request(ctx, op, data)
}

func (e *env) request(ctx context.Context, op string, data []byte) (*proto.Reply, error) {
	subj, err := proto.AppendWorkerSubject(nil, e.svc.cfg.ID, op)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	raw, err := e.caller.Request(ctx, string(subj), data)
	if err != nil {
		return nil, err
	}
	var r proto.Reply
	if err := proto.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decode reply: %w", err)
	}
	return &r, nil
}

// toolCall builds a request for tool on upstream with raw JSON arguments.
func toolCall(upstream, tool, args string) proto.Request {
	return proto.Request{
		Method: "tools/call", Upstream: upstream, Name: tool, Edge: "e1",
		Params: []byte(`{"name":"` + upstream + `__` + tool + `","arguments":` + args + `}`),
	}
}

// wantResult fails unless r carries exactly the raw result want.
func wantResult(t *testing.T, r *proto.Reply, want string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("reply error %v, want result %.80s", r.Error, want)
	}
	if string(r.Result) != want {
		t.Fatalf("result = %.200s\nwant     %.200s", r.Result, want)
	}
	if r.Worker != "w1" {
		t.Errorf("reply.Worker = %q, want w1", r.Worker)
	}
}

// wantText fails unless r's result has exactly one text content, text.
// (Other fields depend on the protocol era the upstream session
// negotiated: a 2026-07-28 result carries resultType and _meta.)
func wantText(t *testing.T, r *proto.Reply, text string) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("reply error %v, want text %q", r.Error, text)
	}
	var res struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != text {
		t.Fatalf("result %s, want one text %q (%v)", r.Result, text, err)
	}
}

// resultText returns the text of r's one text content.
func resultText(t *testing.T, r *proto.Reply) string {
	t.Helper()
	var res struct {
		Content []struct{ Type, Text string }
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Content) != 1 {
		t.Fatalf("reply %s %v, want one text content", r.Result, r.Error)
	}
	return res.Content[0].Text
}

// wantError fails unless r carries an error with code and a message
// containing msg.
func wantError(t *testing.T, r *proto.Reply, code int32, msg string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("reply result %.80s, want error code %d", r.Result, code)
	}
	if r.Error.Code != code || !containsFold(r.Error.Msg, msg) {
		t.Fatalf("reply error %v, want code %d with %q", r.Error, code, msg)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// recv waits for one value on c.
func recv[T any](t *testing.T, c <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	var zero T // Fatalf does not return
	return zero
}

// toolSet reads the upstream's tool set from KV (zero value if absent).
func (e *env) toolSet(name string) proto.ListSet { return e.listSet(name, proto.KindTools) }

// listSet reads the upstream's list set of kind from KV (zero value if
// absent).
func (e *env) listSet(name, kind string) proto.ListSet {
	e.t.Helper()
	var set proto.ListSet
	kv, err := e.js.KeyValue(e.t.Context(), proto.BucketLists)
	if err != nil {
		return set
	}
	ent, err := kv.Get(e.t.Context(), proto.ListKey(name, kind))
	if err != nil {
		return set
	}
	if err := proto.Unmarshal(ent.Value(), &set); err != nil {
		e.t.Fatal(err)
	}
	return set
}

func (e *env) toolSetRevision(name string) uint64 {
	e.t.Helper()
	kv, err := e.js.KeyValue(e.t.Context(), proto.BucketLists)
	if err != nil {
		e.t.Fatal(err)
	}
	ent, err := kv.Get(e.t.Context(), proto.ListKey(name, proto.KindTools))
	if err != nil {
		e.t.Fatal(err)
	}
	return ent.Revision()
}

// poolCatalog asks the upstream's pool (queue group) to refresh its tool
// set.
func (e *env) poolCatalog(name string) {
	e.t.Helper()
	subj, _ := proto.AppendPoolSubject(nil, name, proto.OpCatalog)
	data, _ := proto.Marshal(&proto.Request{Method: "catalog", Upstream: name})
	ctx, cancel := context.WithTimeout(e.t.Context(), 20*time.Second)
	defer cancel()
	raw, err := e.caller.Request(ctx, string(subj), data)
	if err != nil {
		e.t.Fatalf("catalog: %v", err)
	}
	var r proto.Reply
	if err := proto.Unmarshal(raw, &r); err != nil || r.Error != nil {
		e.t.Fatalf("catalog reply %+v, %v", r.Error, err)
	}
}
