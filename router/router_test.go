package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

type rig struct {
	t      *testing.T
	nc     *nats.Conn
	caller *bus.Caller
	kv     jetstream.KeyValue
	tools  jetstream.KeyValue
	r      *Service
	src    *swapSource // the router's tenancy; config.DefaultTenants until swapped

	mu    sync.Mutex
	beats map[string]map[string]bool // guarded by mu: workers still beating
}

// swapSource is a tenancy.Source whose snapshot a test replaces.
type swapSource struct {
	p atomic.Pointer[tenancy.Snapshot]
}

func (s *swapSource) Current() *tenancy.Snapshot { return s.p.Load() }

// set replaces the snapshot with one of tenants.
func (s *swapSource) set(t testing.TB, tenants ...tenancy.Tenant) {
	t.Helper()
	snap := tenancy.NewSnapshot(tenants, nil)
	if p := snap.Problems(); len(p) > 0 {
		t.Fatalf("tenants: %v", p)
	}
	s.p.Store(snap)
}

func newRig(t *testing.T) *rig {
	s := provisiontest.Start(t)
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := bus.Bucket(t.Context(), js, proto.BucketUpstreams)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := bus.Bucket(t.Context(), js, proto.BucketLists)
	if err != nil {
		t.Fatal(err)
	}
	src := &swapSource{}
	src.set(t, config.DefaultTenants()...)
	r, err := New(Config{PageSize: 2, Tenancy: src, TenancyPoll: 20 * time.Millisecond}, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("router did not stop")
		}
	})
	c := bus.NewCaller(nc, 0)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// The router takes calls once it has loaded its (empty) catalog and
	// heard the workers: the tests' calls find it subscribed.
	deadline := time.Now().Add(10 * time.Second)
	for !r.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("router not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &rig{t: t, nc: nc, caller: c, kv: kv, tools: tools, r: r, src: src}
}

func (g *rig) upstream(name string, tools ...string) {
	spec, _ := proto.Marshal(&proto.UpstreamSpec{Name: name, Transport: proto.TransportStreamable, URL: "http://x"})
	if _, err := g.kv.Put(g.t.Context(), name, spec); err != nil {
		g.t.Fatal(err)
	}
	ts := &proto.ListSet{Upstream: name, Kind: proto.KindTools}
	for _, n := range tools {
		ts.Items = append(ts.Items, []byte(fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, n)))
	}
	data, _ := proto.Marshal(ts)
	if _, err := g.tools.Put(g.t.Context(), proto.ListKey(name, proto.KindTools), data); err != nil {
		g.t.Fatal(err)
	}
}

// list stores an upstream's list of kind: objects with key set to each of vals.
func (g *rig) list(name, kind, key string, vals ...string) {
	ls := &proto.ListSet{Upstream: name, Kind: kind, Items: [][]byte{}}
	for _, v := range vals {
		ls.Items = append(ls.Items, []byte(fmt.Sprintf(`{%q:%q}`, key, v)))
	}
	data, _ := proto.Marshal(ls)
	if _, err := g.tools.Put(g.t.Context(), proto.ListKey(name, kind), data); err != nil {
		g.t.Fatal(err)
	}
}

// catalogOnly puts an upstream in the catalog without a tool set.
func (g *rig) catalogOnly(name string) {
	spec, _ := proto.Marshal(&proto.UpstreamSpec{Name: name, Transport: proto.TransportStreamable, URL: "http://x"})
	if _, err := g.kv.Put(g.t.Context(), name, spec); err != nil {
		g.t.Fatal(err)
	}
}

// worker announces a fake worker and counts the calls it receives; it
// answers each with its own name.
func (g *rig) worker(id string, up map[string]bool) *nats.Subscription {
	subj, _ := proto.WorkerSubjectAll(id)
	sub, err := g.nc.Subscribe(subj, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		res, _ := json.Marshal(map[string]string{"worker": id, "tool": req.Name, "upstream": req.Upstream, "method": req.Method,
			"auth": m.Header.Get(proto.HdrAuthorization)})
		to := m.Header.Get(proto.HdrReplyTo)
		if to == "" {
			to = m.Reply // a router's own request (logging/setLevel fan-out)
		}
		_ = bus.RespondReply(g.nc, to, &proto.Reply{Result: res, Worker: id})
	})
	if err != nil {
		g.t.Fatal(err)
	}
	g.heartbeat(id, up)
	return sub
}

// heartbeat publishes the worker's state now and keeps republishing it (as
// a real worker does), so a router whose subscription came later sees it.
func (g *rig) heartbeat(id string, up map[string]bool) {
	g.mu.Lock()
	first := g.beats == nil
	if first {
		g.beats = map[string]map[string]bool{}
	}
	_, known := g.beats[id]
	g.beats[id] = up
	g.mu.Unlock()
	g.publishBeat(id, up)
	if known {
		return
	}
	go func() {
		for {
			select {
			case <-g.t.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			g.mu.Lock()
			cur, ok := g.beats[id]
			g.mu.Unlock()
			if ok {
				g.publishBeat(id, cur)
			}
		}
	}()
}

// silence stops a worker's heartbeats.
func (g *rig) silence(id string) {
	g.mu.Lock()
	delete(g.beats, id)
	g.mu.Unlock()
}

func (g *rig) publishBeat(id string, up map[string]bool) {
	hb := &proto.Heartbeat{Worker: id, Boot: 1, IntervalMs: 60_000}
	for n, u := range up {
		hb.Upstreams = append(hb.Upstreams, proto.UpstreamState{Name: n, Up: u, Err: downDetail})
	}
	data, _ := proto.Marshal(hb)
	subj, _ := proto.EvtWorkerSubject(id)
	_ = g.nc.Publish(subj, data) // fails only once the test is over
}

// downDetail is what the rig's workers report for an upstream that is
// down, as a real worker does: for operators, naming the upstream's URL.
const downDetail = `connect: calling "initialize": Post "http://127.0.0.1:1/mcp": dial tcp 127.0.0.1:1: connect: connection refused`

func (g *rig) call(op string, req *proto.Request) (map[string]string, error) {
	return g.callAs(DefaultTenant, op, req)
}

// callAs is call for tenant.
func (g *rig) callAs(tenant, op string, req *proto.Request) (map[string]string, error) {
	data, _ := proto.Marshal(req)
	subj, _ := proto.AppendRouteSubject(nil, tenant, op)
	ctx, cancel := context.WithTimeout(g.t.Context(), 5*time.Second)
	defer cancel()
	out, err := g.caller.Request(ctx, string(subj), data)
	// The router subscribes once it has loaded what the test wrote (and
	// heard the workers): until then nobody takes the call.
	for pe := (*proto.Error)(nil); errors.As(err, &pe) && pe.Code == proto.CodeUnavailable && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond)
		out, err = g.caller.Request(ctx, string(subj), data)
	}
	if err != nil {
		return nil, err
	}
	var rep proto.Reply
	if err := proto.Unmarshal(out, &rep); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, rep.Error
	}
	var m map[string]string
	if json.Unmarshal(rep.Result, &m) != nil {
		m = map[string]string{}
	}
	m["raw"] = string(rep.Result)
	return m, nil
}

func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestRouterPlacement(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo", "fs.read")
	g.worker("w-1", map[string]bool{"a": true})
	g.worker("w-2", map[string]bool{"a": true})
	call := func(session string) (map[string]string, error) {
		return g.call(proto.OpToolsCall, &proto.Request{Method: "tools/call", Edge: "e", Session: session, Name: "a__echo"})
	}
	eventually(t, func() error {
		if len(g.r.presence.View().ByUpstream["a"]) != 2 {
			return errors.New("workers not seen")
		}
		_, err := call("s")
		return err
	})
	// A session sticks to one worker; sessions spread over both.
	seen := map[string]bool{}
	for i := range 16 {
		first, err := call(fmt.Sprint("s", i))
		if err != nil {
			t.Fatal(err)
		}
		if first["tool"] != "echo" || first["upstream"] != "a" {
			t.Fatalf("forwarded as %v", first)
		}
		for range 3 {
			again, err := call(fmt.Sprint("s", i))
			if err != nil || again["worker"] != first["worker"] {
				t.Fatalf("session s%d moved from %s to %v (%v)", i, first["worker"], again, err)
			}
		}
		seen[first["worker"]] = true
	}
	if len(seen) != 2 {
		t.Fatalf("sessions all on %v", seen)
	}
	// Stateless calls go round-robin.
	seen = map[string]bool{}
	for range 4 {
		m, err := call("")
		if err != nil {
			t.Fatal(err)
		}
		seen[m["worker"]] = true
	}
	if len(seen) != 2 {
		t.Fatalf("stateless calls all on %v", seen)
	}
}

func TestRouterErrors(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo")
	g.upstream("b", "echo")
	g.upstream("c", "echo")
	g.catalogOnly("d") // in the catalog, never listed by any worker
	g.worker("w-1", map[string]bool{"a": false, "c": true})
	eventually(t, func() error {
		if !g.r.Ready() || len(g.r.presence.View().ByUpstream["a"]) != 1 || !g.r.snap.Load().Upstreams["d"] {
			return errors.New("not ready")
		}
		return nil
	})
	tests := []struct {
		name string
		op   string
		req  proto.Request
		code int32
	}{
		{"unknown tool", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "c__nope"}, proto.CodeInvalidParams},
		{"unknown upstream prefix", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "zz__echo"}, proto.CodeInvalidParams},
		{"tool of a down upstream, not listed", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__nope"}, proto.CodeUpstreamUnavailable},
		{"never-listed upstream names it", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "d__echo"}, proto.CodeNoWorkers},
		{"never-listed upstream, passthrough", proto.OpToolsCall, proto.Request{Method: "tools/call", View: "d", Name: "echo"}, proto.CodeNoWorkers},
		{"unknown passthrough view", proto.OpToolsCall, proto.Request{Method: "tools/call", View: "zz", Name: "echo"}, proto.CodeInvalidParams},
		{"upstream down", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__echo"}, proto.CodeUpstreamUnavailable},
		{"no worker", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "b__echo"}, proto.CodeNoWorkers},
		{"deadline passed", proto.OpToolsCall, proto.Request{Method: "tools/call", Name: "a__echo", DeadlineUnixMs: 1}, proto.CodeTimeout},
		{"unknown op", "sampling_createmessage", proto.Request{Method: "sampling/createMessage"}, proto.CodeMethodNotFound},
		{"unknown prompt", proto.OpPromptsGet, proto.Request{Method: "prompts/get", Name: "c__nope"}, proto.CodeInvalidParams},
		{"unknown resource", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "x://none"}, codeResourceNotFound},
		{"prompt of an unknown passthrough view", proto.OpPromptsGet, proto.Request{Method: "prompts/get", View: "zz", Name: "p"}, proto.CodeInvalidParams},
		{"completion ref of no known type", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: []byte(`{"ref":{"type":"ref/x"}}`)}, proto.CodeInvalidParams},
		{"completion params not an object", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: []byte(`[1]`)}, proto.CodeInvalidParams},
		{"bad cursor", proto.OpToolsList, proto.Request{Method: "tools/list", Params: []byte(`{"cursor":"%%%"}`)}, proto.CodeInvalidParams},
		{"completion ref name not a string", proto.OpCompletionComplete, proto.Request{Method: "completion/complete", Params: []byte(`{"ref":{"type":"ref/prompt","name":5}}`)}, proto.CodeInvalidParams},
		// Members the router reads, given twice (package fields): a
		// lenient decoder further on could read the other one.
		{"completion ref twice", proto.OpCompletionComplete, proto.Request{Method: "completion/complete",
			Params: []byte(`{"ref":{"type":"ref/prompt","name":"c__echo"},"Ref":{"type":"ref/prompt","name":"c__secret"}}`)}, proto.CodeInvalidRequest},
		{"completion ref name by case", proto.OpCompletionComplete, proto.Request{Method: "completion/complete",
			Params: []byte(`{"ref":{"type":"ref/prompt","name":"c__echo","Name":"c__secret"}}`)}, proto.CodeInvalidRequest},
		{"completion ref type twice", proto.OpCompletionComplete, proto.Request{Method: "completion/complete",
			Params: []byte(`{"ref":{"type":"ref/resource","type":"ref/prompt","name":"c__echo"}}`)}, proto.CodeInvalidRequest},
		{"cursor by case", proto.OpToolsList, proto.Request{Method: "tools/list", Params: []byte(`{"cursor":"a","CURSOR":"b"}`)}, proto.CodeInvalidRequest},
		{"cursor twice", proto.OpToolsList, proto.Request{Method: "tools/list", Params: []byte(`{"cursor":"a","cursor":"b"}`)}, proto.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.call(tc.op, &tc.req)
			var pe *proto.Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("got %v, want code %d", err, tc.code)
			}
			// What the workers report for operators stays with them: the
			// client gets a fixed phrase, and no worker's name.
			if strings.Contains(pe.Msg, "127.0.0.1") || strings.Contains(pe.Msg, "http") || strings.Contains(pe.Msg, "w-1") ||
				(pe.Code == proto.CodeUpstreamUnavailable && !strings.Contains(pe.Msg, "(connection refused)")) {
				t.Fatalf("message %q", pe.Msg)
			}
		})
	}
	t.Run("bad msgpack", func(t *testing.T) {
		subj, _ := proto.AppendRouteSubject(nil, DefaultTenant, proto.OpToolsCall)
		out, err := g.caller.Request(t.Context(), string(subj), []byte{0xc1, 0x00})
		if err != nil {
			t.Fatal(err)
		}
		var rep proto.Reply
		if err := proto.Unmarshal(out, &rep); err != nil || rep.Error == nil || rep.Error.Code != proto.CodeBadEnvelope {
			t.Fatalf("got %+v %v", rep, err)
		}
	})
}

func TestRouterWorkerGoneIsNotDelivered(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo")
	sub := g.worker("w-1", map[string]bool{"a": true})
	eventually(t, func() error {
		_, err := g.call(proto.OpToolsCall, &proto.Request{Method: "tools/call", Session: "s", Name: "a__echo"})
		return err
	})
	g.silence("w-1")
	_ = sub.Unsubscribe() // the worker's process died: its subscription is gone, presence not yet
	_, err := g.call(proto.OpToolsCall, &proto.Request{Method: "tools/call", Session: "s", Name: "a__echo"})
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.CodeNotDelivered {
		t.Fatalf("got %v, want not delivered", err)
	}
	eventually(t, func() error {
		_, err := g.call(proto.OpToolsCall, &proto.Request{Method: "tools/call", Session: "s", Name: "a__echo"})
		if !errors.Is(err, proto.ErrNoWorkers) {
			return fmt.Errorf("after the hint: %v", err)
		}
		return nil
	})
}

func TestRouterToolsListAndChanges(t *testing.T) {
	g := newRig(t)
	events := make(chan *nats.Msg, 16)
	subj, _ := proto.EvtListChangedSubject(DefaultTenant)
	if _, err := g.nc.ChanSubscribe(subj, events); err != nil {
		t.Fatal(err)
	}
	g.upstream("a", "x", "y", "z")
	g.worker("w-1", map[string]bool{"a": true})
	var names []string
	eventually(t, func() error {
		names = nil
		cursor := ""
		for {
			m, err := g.call(proto.OpToolsList, &proto.Request{Method: "tools/list", Params: []byte(fmt.Sprintf(`{"cursor":%q}`, cursor))})
			if err != nil {
				return err
			}
			var page struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
				NextCursor string `json:"nextCursor"`
			}
			if err := json.Unmarshal([]byte(m["raw"]), &page); err != nil {
				return err
			}
			for _, tl := range page.Tools {
				names = append(names, tl.Name)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if len(names) != 3 {
			return fmt.Errorf("listed %v", names)
		}
		return nil
	})
	select {
	case m := <-events:
		var tc proto.ListChanged
		if err := proto.Unmarshal(m.Data, &tc); err != nil || len(tc.Upstreams) != 1 || tc.Upstreams[0] != "a" {
			t.Fatalf("event %+v %v", tc, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no tools_changed event")
	}
	g.heartbeat("w-1", map[string]bool{"a": false}) // upstream went down
	eventually(t, func() error {
		m, err := g.call(proto.OpToolsList, &proto.Request{Method: "tools/list"})
		if err != nil {
			return err
		}
		if m["raw"] != `{"tools":[]}` {
			return fmt.Errorf("still listed: %s", m["raw"])
		}
		return nil
	})
}

// TestRouterMethods: every forwarded method reaches the worker of the right
// upstream with the upstream's own name; lists of every kind come from the
// snapshot; the federated logging/setLevel reaches every upstream that is up.
func TestRouterMethods(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo")
	g.upstream("b", "echo")
	g.list("a", proto.KindPrompts, "name", "greet")
	g.list("b", proto.KindResources, "uri", "b://doc")
	g.list("b", proto.KindResourceTemplates, "uriTemplate", "b://item/{id}")
	var mu sync.Mutex
	setLevel := map[string]bool{}
	for _, w := range []string{"w-a", "w-b"} {
		up := map[string]bool{w[2:]: true}
		g.worker(w, up)
		subj, _ := proto.WorkerSubjectAll(w)
		sub, err := g.nc.Subscribe(subj, func(m *nats.Msg) {
			var req proto.Request
			if proto.Unmarshal(m.Data, &req) == nil && req.Method == "logging/setLevel" {
				mu.Lock()
				setLevel[req.Upstream] = true
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	eventually(t, func() error {
		snap := g.r.snap.Load()
		if !g.r.Ready() || len(g.r.presence.View().ByUpstream["b"]) != 1 || len(g.r.presence.View().ByUpstream["a"]) != 1 ||
			snap.List(proto.KindResourceTemplates, "").Len() != 1 || snap.List(proto.KindPrompts, "").Len() != 1 {
			return errors.New("not ready")
		}
		return nil
	})
	tests := []struct {
		name, op                string
		req                     proto.Request
		upstream, worker, named string
	}{
		{"prompt, federated", proto.OpPromptsGet, proto.Request{Method: "prompts/get", Name: "a__greet"}, "a", "w-a", "greet"},
		{"prompt, passthrough", proto.OpPromptsGet, proto.Request{Method: "prompts/get", View: "a", Name: "greet"}, "a", "w-a", ""},
		{"resource by URI", proto.OpResourcesRead, proto.Request{Method: "resources/read", Name: "b://doc"}, "b", "w-b", ""},
		{"resource by template", proto.OpResourcesSubscribe, proto.Request{Method: "resources/subscribe", Name: "b://item/7"}, "b", "w-b", ""},
		{"resource, passthrough", proto.OpResourcesUnsubscribe, proto.Request{Method: "resources/unsubscribe", View: "a", Name: "a://x"}, "a", "w-a", ""},
		{"completion of a prompt", proto.OpCompletionComplete, proto.Request{Method: "completion/complete",
			Params: []byte(`{"ref":{"type":"ref/prompt","name":"a__greet"},"argument":{"name":"x","value":"y"}}`)}, "a", "w-a", "greet"},
		{"completion of a template", proto.OpCompletionComplete, proto.Request{Method: "completion/complete",
			Params: []byte(`{"ref":{"type":"ref/resource","uri":"b://item/{id}"},"argument":{"name":"id","value":"1"}}`)}, "b", "w-b", ""},
		{"set level, passthrough", proto.OpLoggingSetLevel, proto.Request{Method: "logging/setLevel", View: "b", Params: []byte(`{"level":"info"}`)}, "b", "w-b", ""},
		{"task, federated", proto.OpTasksGet, proto.Request{Method: "tasks/get", Name: taskOf("b")}, "b", "w-b", ""},
		{"task, passthrough", proto.OpTasksCancel, proto.Request{Method: "tasks/cancel", View: "a", Name: taskOf("a")}, "a", "w-a", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := g.call(tc.op, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got["upstream"] != tc.upstream || got["worker"] != tc.worker || got["tool"] != tc.named || got["method"] != tc.req.Method {
				t.Fatalf("got %v, want upstream %s on %s named %q", got, tc.upstream, tc.worker, tc.named)
			}
		})
	}
	t.Run("lists", func(t *testing.T) {
		for _, c := range []struct{ op, method, want string }{
			{proto.OpPromptsList, "prompts/list", `{"prompts":[{"name":"a__greet"}]}`},
			{proto.OpResourcesList, "resources/list", `{"resources":[{"uri":"b://doc"}]}`},
			{proto.OpResourceTemplatesList, "resources/templates/list", `{"resourceTemplates":[{"uriTemplate":"b://item/{id}"}]}`},
		} {
			got, err := g.call(c.op, &proto.Request{Method: c.method})
			if err != nil || got["raw"] != c.want {
				t.Errorf("%s = %v, %v; want %s", c.method, got["raw"], err, c.want)
			}
		}
	})
	t.Run("unknown tasks", func(t *testing.T) {
		for _, r := range []proto.Request{
			{Method: "tasks/get", Name: "upstream-own-id"},
			{Method: "tasks/update", Name: taskOf("zz")},        // no such upstream
			{Method: "tasks/get", View: "a", Name: taskOf("b")}, // another endpoint's upstream
		} {
			_, err := g.call(proto.Op(r.Method), &r)
			var pe *proto.Error
			if !errors.As(err, &pe) || pe.Code != proto.CodeInvalidParams {
				t.Errorf("%s %q in view %q: %v, want -32602", r.Method, r.Name, r.View, err)
			}
		}
	})
	t.Run("set level, federated", func(t *testing.T) {
		got, err := g.call(proto.OpLoggingSetLevel, &proto.Request{Method: "logging/setLevel", Params: []byte(`{"level":"debug"}`)})
		if err != nil || got["raw"] != "{}" {
			t.Fatalf("got %v, %v", got, err)
		}
		// The recording subscription runs beside the fake worker that
		// answers: what it saw is awaited.
		eventually(t, func() error {
			mu.Lock()
			defer mu.Unlock()
			if !setLevel["a"] || !setLevel["b"] {
				return fmt.Errorf("setLevel reached %v, want a and b", setLevel)
			}
			return nil
		})
	})
}

// taskOf returns a gateway task id of upstream (routers read only the
// upstream from it).
func taskOf(upstream string) string {
	c, _ := taskid.New([]byte("0123456789abcdef0123456789abcdef"))
	return c.Mint(taskid.Scope{Tenant: "default"}, upstream, "t-1")
}

// TestRouterParamHeaders: a 2026-07-28 tools/call of a tool with
// x-mcp-header annotations is checked against its Mcp-Param headers
// (SEP-2243): a mismatch is -32020 and never reaches a worker.
func TestRouterParamHeaders(t *testing.T) {
	g := newRig(t)
	g.upstream("a", "echo")
	ls := &proto.ListSet{Upstream: "a", Kind: proto.KindTools, Items: [][]byte{
		[]byte(`{"name":"deploy","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`)}}
	data, _ := proto.Marshal(ls)
	if _, err := g.tools.Put(t.Context(), proto.ListKey("a", proto.KindTools), data); err != nil {
		t.Fatal(err)
	}
	g.worker("w-1", map[string]bool{"a": true})
	eventually(t, func() error {
		if e, ok := g.r.snap.Load().Federated.Lookup("a__deploy"); !ok || len(e.Params) != 1 || !g.r.presence.View().Up("a") {
			return errors.New("not ready")
		}
		return nil
	})
	for _, c := range []struct {
		name, protocol, header string
		code                   int32 // 0: forwarded
	}{
		{"match", "2026-07-28", "eu", 0},
		{"mismatch", "2026-07-28", "us", paramhdr.CodeHeaderMismatch},
		{"missing", "2026-07-28", "", paramhdr.CodeHeaderMismatch},
		{"2025 era: not checked", "2025-11-25", "", 0},
		// The arguments the header mirrors, given twice: a lenient
		// upstream decoder may read the one the header does not match.
		{"arguments twice", "2026-07-28", "eu", proto.CodeInvalidRequest},
		{"argument by case", "2026-07-28", "eu", paramhdr.CodeHeaderMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := `{"name":"a__deploy","arguments":{"region":"eu"}}`
			switch c.name {
			case "arguments twice":
				params = `{"name":"a__deploy","arguments":{"region":"eu"},"Arguments":{"region":"us"}}`
			case "argument by case":
				params = `{"name":"a__deploy","arguments":{"region":"eu","Region":"us"}}`
			}
			req := &proto.Request{Method: "tools/call", Name: "a__deploy", Protocol: c.protocol, Params: []byte(params)}
			msg := &nats.Msg{Header: nats.Header{}}
			if c.header != "" {
				msg.Header.Set("Mcp-Param-Region", c.header)
			}
			_, err := g.callMsg(proto.OpToolsCall, req, msg)
			var pe *proto.Error
			switch {
			case c.code == 0 && err != nil:
				t.Fatalf("got %v, want the call forwarded", err)
			case c.code != 0 && (!errors.As(err, &pe) || pe.Code != c.code):
				t.Fatalf("got %v, want code %d", err, c.code)
			}
		})
	}
}

// callMsg is call with the route message's headers taken from msg.
func (g *rig) callMsg(op string, req *proto.Request, msg *nats.Msg) (map[string]string, error) {
	return g.callMsgAs(DefaultTenant, op, req, msg)
}

// callMsgAs is callMsg for tenant.
func (g *rig) callMsgAs(tenant, op string, req *proto.Request, msg *nats.Msg) (map[string]string, error) {
	data, _ := proto.Marshal(req)
	subj, _ := proto.AppendRouteSubject(nil, tenant, op)
	ctx, cancel := context.WithTimeout(g.t.Context(), 5*time.Second)
	defer cancel()
	k := g.caller.New()
	defer k.Close()
	msg.Subject, msg.Reply, msg.Data = string(subj), k.Reply(), data
	if err := g.nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	out, err := k.Wait(ctx)
	if err != nil {
		return nil, err
	}
	var rep proto.Reply
	if err := proto.Unmarshal(out, &rep); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, rep.Error
	}
	var m map[string]string
	if json.Unmarshal(rep.Result, &m) != nil {
		m = map[string]string{}
	}
	m["raw"] = string(rep.Result)
	return m, nil
}
