package limit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// edge is one Fleet with its Limiter, as an edge would hold them.
type edge struct {
	id    string
	fleet *Fleet
	lim   *Limiter
	stop  context.CancelFunc
	done  chan error
	// halted: Run has returned (set by halt, on the test goroutine)
	halted bool
}

// startEdge runs a Fleet for id on its own connection to s; its Limiter
// uses clk, so buckets refill only when the test says.
func startEdge(t *testing.T, s *server.Server, id string, clk *clock) *edge {
	t.Helper()
	return startEdgeOn(t, natstest.Connect(t, s), id, clk)
}

// testHeartbeat is the test edges' heartbeat; the bucket is provisioned
// for it, as internal/provision does for the production 1s.
const testHeartbeat = 50 * time.Millisecond

// provisionEdges creates the edges' bucket as tenancy-svc provisions it,
// with the TTL for testHeartbeat.
func provisionEdges(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	_, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{
		Bucket: BucketEdges, History: 1, TTL: testHeartbeat * proto.HeartbeatMisses, Storage: jetstream.MemoryStorage,
	})
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		t.Fatal(err)
	}
}

func startEdgeOn(t *testing.T, nc *nats.Conn, id string, clk *clock) *edge {
	t.Helper()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	provisionEdges(t, js)
	f, err := NewFleet(js, FleetConfig{ID: id, Heartbeat: testHeartbeat, OpTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Fleet: f, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	e := &edge{id: id, fleet: f, lim: l, stop: cancel, done: make(chan error, 1)}
	go func() { e.done <- f.Run(ctx) }()
	t.Cleanup(func() { e.halt(t) })
	return e
}

// halt stops the edge's Fleet and waits for Run to return.
func (e *edge) halt(t *testing.T) {
	t.Helper()
	e.stop()
	if e.halted {
		return
	}
	select {
	case err := <-e.done:
		e.halted = true
		if err != nil {
			t.Errorf("%s: Run: %v", e.id, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Run did not return 10s after cancel", e.id)
	}
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

func allSee(edges []*edge, n int) func() bool {
	return func() bool {
		for _, e := range edges {
			if !e.fleet.Ready() || e.fleet.View().N() != n {
				return false
			}
		}
		return true
	}
}

// fill admits on e until refused and returns the tickets.
func fill(t *testing.T, e *edge, tenant string, lim tenancy.Limits, principal string) []Ticket {
	t.Helper()
	var ts []Ticket
	for range 1000 {
		tk, err := e.lim.Admit(tenant, lim, principal)
		if err != nil {
			if err.Code != proto.CodeLimited {
				t.Fatalf("%s: %v", e.id, err)
			}
			return ts
		}
		ts = append(ts, tk)
	}
	t.Fatalf("%s: never refused", e.id)
	return nil
}

func TestLimitFleetShares(t *testing.T) {
	s := natstest.Start(t)
	clk := newClock()
	var edges []*edge
	for _, id := range []string{"edge-a", "edge-b", "edge-c"} {
		edges = append(edges, startEdge(t, s, id, clk))
	}
	waitFor(t, "every edge sees 3", allSee(edges, 3))
	for _, e := range edges {
		v := e.fleet.View()
		if v.Members[v.Rank] != e.id {
			t.Fatalf("%s: view %+v", e.id, v)
		}
		if stale, _, reason := e.fleet.Stale(); stale {
			t.Fatalf("%s stale: %s", e.id, reason)
		}
	}

	// In flight: the shares sum to the tenant's cap.
	flight := tenancy.Limits{MaxInFlight: 10}
	held := map[string][]Ticket{}
	total := 0
	for _, e := range edges {
		held[e.id] = fill(t, e, "acme", flight, "")
		if n := len(held[e.id]); n != 3 && n != 4 {
			t.Fatalf("%s: in-flight share %d of 10 among 3", e.id, n)
		}
		total += len(held[e.id])
	}
	if total != 10 {
		t.Fatalf("the edges admitted %d calls at once, max_in_flight is 10", total)
	}

	// A burst: the fleet admits the tenant's burst, not three of them.
	for _, tc := range []struct {
		name      string
		lim       tenancy.Limits
		principal string
		want      int
	}{
		{"tenant", tenancy.Limits{Rate: 1, Burst: 20}, "alice", 20},
		{"principal", tenancy.Limits{PrincipalRate: 1, PrincipalBurst: 7}, "alice", 7},
		{"principal burst below n", tenancy.Limits{PrincipalRate: 1, PrincipalBurst: 2}, "bob", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := 0
			for _, e := range edges {
				got += len(fill(t, e, "burst-"+fmt.Sprint(tc.want), tc.lim, tc.principal))
			}
			if got != tc.want {
				t.Fatalf("the fleet admitted %d in a burst, want %d", got, tc.want)
			}
		})
	}

	// edge-c stops cleanly: the others see 2 at once (its key deleted,
	// not expired) and their shares grow, counting the calls they hold.
	edges[2].halt(t)
	waitFor(t, "edges a and b see 2", allSee(edges[:2], 2))
	total = 0
	for _, e := range edges[:2] {
		more := fill(t, e, "acme", flight, "")
		held[e.id] = append(held[e.id], more...)
		if n := len(held[e.id]); n != 5 {
			t.Fatalf("%s: holds %d calls, want its new share 5", e.id, n)
		}
		total += len(held[e.id])
	}
	if total != 10 {
		t.Fatalf("the edges hold %d calls, max_in_flight is 10", total)
	}
	kv, err := edges[0].fleet.js.KeyValue(t.Context(), BucketEdges)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(t.Context(), "edge-c"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("edge-c's key after a clean stop: %v", err)
	}
	for _, tk := range held["edge-a"] {
		tk.Done()
	}
	if n := edges[0].lim.InFlight("acme"); n != 0 {
		t.Fatalf("edge-a in flight %d after every Done", n)
	}
}

// TestLimitFleetExpiry: an edge that stops without deleting its key (a
// crash) is dropped after its missed heartbeats.
func TestLimitFleetExpiry(t *testing.T) {
	s := natstest.Start(t)
	clk := newClock()
	a := startEdge(t, s, "edge-a", clk)
	waitFor(t, "edge-a ready", allSee([]*edge{a}, 1))
	kv, err := a.fleet.js.KeyValue(t.Context(), BucketEdges)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "edge-ghost", []byte(`{"heartbeatMs":20}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "edge-a sees the ghost", allSee([]*edge{a}, 2))
	if v := a.fleet.View(); v.Members[0] != "edge-a" || v.Members[1] != "edge-ghost" || v.Rank != 0 {
		t.Fatalf("view %+v", v)
	}
	waitFor(t, "the ghost expires", allSee([]*edge{a}, 1))
	// A second edge starting now does not count it either: the bucket's
	// TTL (3 heartbeats of edge-a) has removed it or will, and until then
	// it would only count it for its own timeout.
	b := startEdge(t, s, "edge-b", clk)
	waitFor(t, "a and b see 2", allSee([]*edge{a, b}, 2))
}

// TestLimitFleetStale: with NATS gone, a Fleet turns stale and keeps its
// last View rather than counting itself alone; once NATS is back (its
// memory bucket lost with it, and provisioned again by its owner) the
// edges announce themselves again.
func TestLimitFleetStale(t *testing.T) {
	srv := newRestartable(t)
	clk := newClock()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	a := startEdgeOn(t, connect(), "edge-a", clk)
	b := startEdgeOn(t, connect(), "edge-b", clk)
	waitFor(t, "both see 2", allSee([]*edge{a, b}, 2))
	before := a.fleet.View()

	srv.stop()
	waitFor(t, "edge-a stale", func() bool { st, _, _ := a.fleet.Stale(); return st })
	if a.fleet.View() != before || !a.fleet.Ready() {
		t.Fatalf("stale edge-a: view %+v, ready %v", a.fleet.View(), a.fleet.Ready())
	}
	if n := len(fill(t, a, "acme", tenancy.Limits{MaxInFlight: 10}, "")); n != 5 {
		t.Fatalf("stale edge-a admitted %d calls, want its last share 5", n)
	}
	if _, since, reason := a.fleet.Stale(); since.IsZero() || reason == "" {
		t.Fatalf("stale since %v, reason %q", since, reason)
	}

	srv.start()
	// The memory bucket was lost with the server: tenancy-svc provisions
	// it again (within its reconcile interval); the edges never create it.
	pjs, err := jetstream.New(connect())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bucket provisioned again", func() bool {
		_, err := pjs.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{
			Bucket: BucketEdges, History: 1, TTL: testHeartbeat * proto.HeartbeatMisses, Storage: jetstream.MemoryStorage,
		})
		return err == nil || errors.Is(err, jetstream.ErrBucketExists)
	})
	waitFor(t, "both fresh again", func() bool {
		for _, e := range []*edge{a, b} {
			if st, _, _ := e.fleet.Stale(); st {
				return false
			}
		}
		return true
	})
	waitFor(t, "both see 2 again", allSee([]*edge{a, b}, 2))
	b.halt(t)
	waitFor(t, "edge-a alone", allSee([]*edge{a}, 1))
}

// restartable is a NATS server on a fixed port that can be stopped and
// started again.
type restartable struct {
	t    *testing.T
	opts server.Options
	s    *server.Server
}

func newRestartable(t *testing.T) *restartable {
	port := natstest.RestartablePort(t)
	r := &restartable{t: t, opts: server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	opts := r.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		r.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		s.Shutdown()
		r.t.Fatal("server not ready within 5s")
	}
	r.s = s
}

func (r *restartable) stop() {
	if r.s != nil {
		r.s.Shutdown()
		r.s.WaitForShutdown()
		r.s = nil
	}
}

func (r *restartable) url() string { return "nats://127.0.0.1:" + strconv.Itoa(r.opts.Port) }

func TestLimitFleetConfig(t *testing.T) {
	s := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	provisionEdges(t, js)
	for _, cfg := range []FleetConfig{{}, {ID: "Not.A.Slug"}, {ID: "e", Heartbeat: -1}} {
		if _, err := NewFleet(js, cfg, nil); err == nil {
			t.Fatalf("%+v accepted", cfg)
		}
	}
	f, err := NewFleet(js, FleetConfig{ID: "e"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Ready() || f.View().N() != 1 {
		t.Fatal("a Fleet not run is ready or not alone")
	}
	if st, _, reason := f.Stale(); !st || reason == "" {
		t.Fatal("a Fleet not run is not stale")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, "ready", f.Ready)
	if err := f.Run(ctx); err == nil {
		t.Fatal("second Run accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.Ready() {
		t.Fatal("ready after Run returned")
	}
}
