package bus

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// presenceRig runs a Presence and a second connection that plays the
// workers.
type presenceRig struct {
	p       *Presence
	peer    *nats.Conn
	gone    chan goneCall // OnGone calls
	changes chan *View    // OnChange calls
}

func newPresenceRig(t *testing.T) *presenceRig {
	t.Helper()
	s := natstest.Start(t)
	r := &presenceRig{
		p:       NewPresence(natstest.Connect(t, s), nil),
		peer:    natstest.Connect(t, s),
		gone:    make(chan goneCall, 64),
		changes: make(chan *View, 64),
	}
	r.p.OnGone = func(w string) { r.gone <- goneCall{worker: w, marked: r.p.Gone(w)} }
	r.p.OnChange = func(v *View) {
		select {
		case r.changes <- v:
		default: // tests that do not read them must not block Run
		}
	}
	if err := r.p.Start(); err != nil {
		t.Fatal(err)
	}
	// Make sure the server has the subscription before workers publish.
	if err := r.p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Presence.Run did not return within 5s of cancel")
		}
	})
	return r
}

// beat publishes hb on the worker's heartbeat subject.
func (r *presenceRig) beat(t *testing.T, hb *proto.Heartbeat) {
	t.Helper()
	data, err := proto.Marshal(hb)
	if err != nil {
		t.Fatal(err)
	}
	r.raw(t, hb.Worker, data)
}

func (r *presenceRig) raw(t *testing.T, worker string, data []byte) {
	t.Helper()
	subj, err := proto.EvtWorkerSubject(worker)
	if err != nil {
		subj = proto.Prefix + "evt.worker.x"
	}
	if err := r.peer.Publish(subj, data); err != nil {
		t.Fatal(err)
	}
}

// noGone fails if OnGone was called (checked after a later event was seen,
// so callbacks are ordered before it).
func (r *presenceRig) noGone(t *testing.T) {
	t.Helper()
	select {
	case g := <-r.gone:
		t.Errorf("unexpected OnGone(%q)", g.worker)
	default:
	}
}

// goneCall is one OnGone call and what Gone reported while it ran.
type goneCall struct {
	worker string
	marked bool
}

// left expects an OnGone call for worker, made after it was marked Gone
// (so a placement note racing the callback already sees it gone).
func (r *presenceRig) left(t *testing.T, worker, what string) {
	t.Helper()
	g := recv(t, r.gone, what)
	if g.worker != worker || !g.marked {
		t.Fatalf("%s: OnGone(%q) with Gone=%t, want OnGone(%q) with Gone=true", what, g.worker, g.marked, worker)
	}
}

func hb(worker string, boot int64, ups ...proto.UpstreamState) *proto.Heartbeat {
	return &proto.Heartbeat{Worker: worker, Boot: boot, IntervalMs: 60_000, Upstreams: ups}
}

func up(name string) proto.UpstreamState   { return proto.UpstreamState{Name: name, Up: true} }
func down(name string) proto.UpstreamState { return proto.UpstreamState{Name: name, Err: "refused"} }

func ids(ws []*WorkerInfo) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func TestBusPresenceStartAsksForHeartbeats(t *testing.T) {
	s := natstest.Start(t)
	peer := natstest.Connect(t, s)
	sub, err := peer.SubscribeSync(proto.SubjEvtPresence)
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	p := NewPresence(natstest.Connect(t, s), nil)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no presence request after Start: %v", err)
	}
}

func TestBusPresence(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, r *presenceRig)
	}{
		{
			name: "heartbeat makes a worker alive",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-2", 1, up("a")))
				r.beat(t, hb("w-1", 1, up("a"), down("b")))
				waitFor(t, "w-1 and w-2 alive", func() bool { return r.p.Alive("w-1") && r.p.Alive("w-2") })
				v := r.p.View()
				if diff := cmp.Diff([]string{"w-1", "w-2"}, ids(v.ByUpstream["a"])); diff != "" {
					t.Errorf("ByUpstream[a] (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"w-1"}, ids(v.ByUpstream["b"])); diff != "" {
					t.Errorf("ByUpstream[b] (-want +got):\n%s", diff)
				}
				w := v.Workers["w-1"]
				if w == nil || w.ID != "w-1" || w.Boot != 1 || !w.Upstreams["a"].Up || w.Upstreams["b"].Up || w.Upstreams["b"].Err != "refused" {
					t.Errorf("Workers[w-1] = %+v", w)
				}
				for name, want := range map[string]bool{"a": true, "b": false, "c": false} {
					if got := v.Up(name); got != want {
						t.Errorf("View.Up(%q) = %t, want %t", name, got, want)
					}
				}
				if r.p.Gone("w-1") || r.p.Gone("w-never-seen") {
					t.Error("Gone reports a live or unknown worker")
				}
				r.noGone(t)
			},
		},
		{
			name: "upstream coming up flips View.Up",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 1, down("a")))
				waitFor(t, "w-1 alive", func() bool { return r.p.Alive("w-1") })
				if r.p.View().Up("a") {
					t.Fatal("Up(a) with a only down")
				}
				r.beat(t, hb("w-1", 1, up("a")))
				waitFor(t, "Up(a)", func() bool { return r.p.View().Up("a") })
				r.noGone(t)
			},
		},
		{
			name: "load figures refresh the view",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 1, up("a")))
				busy := hb("w-1", 1, up("a"))
				busy.InFlight = 7
				r.beat(t, busy)
				waitFor(t, "in-flight 7", func() bool {
					w := r.p.View().Workers["w-1"]
					return w != nil && w.InFlight == 7
				})
			},
		},
		{
			name: "goodbye removes a worker",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 1, up("a")))
				r.beat(t, hb("w-2", 1, up("a")))
				waitFor(t, "w-1 and w-2 alive", func() bool { return r.p.Alive("w-1") && r.p.Alive("w-2") })
				bye := hb("w-1", 1)
				bye.Bye = true
				r.beat(t, bye)
				r.left(t, "w-1", "OnGone after goodbye")
				if r.p.Alive("w-1") || !r.p.Gone("w-1") {
					t.Errorf("after goodbye: Alive=%t Gone=%t, want false, true", r.p.Alive("w-1"), r.p.Gone("w-1"))
				}
				if diff := cmp.Diff([]string{"w-2"}, ids(r.p.View().ByUpstream["a"])); diff != "" {
					t.Errorf("ByUpstream[a] (-want +got):\n%s", diff)
				}
				if !r.p.Alive("w-2") || r.p.Gone("w-2") {
					t.Error("goodbye of w-1 affected w-2")
				}
			},
		},
		{
			name: "a draining worker stays alive with its upstreams down",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 1, up("a")))
				r.beat(t, hb("w-2", 1, up("a")))
				waitFor(t, "w-1 and w-2 alive", func() bool { return r.p.Alive("w-1") && r.p.Alive("w-2") })
				drain := hb("w-1", 1, up("a"))
				drain.Draining = true
				r.beat(t, drain)
				waitFor(t, "w-1 draining", func() bool { return r.p.Draining("w-1") })
				w := r.p.View().Workers["w-1"]
				if st := w.Upstreams["a"]; st.Up || st.Err != "worker draining" {
					t.Errorf("draining w-1's upstream a = %+v, want down with \"worker draining\"", st)
				}
				if !r.p.Alive("w-1") || r.p.Gone("w-1") || r.p.Draining("w-2") || !r.p.View().Up("a") {
					t.Errorf("Alive(w-1)=%t Gone(w-1)=%t Draining(w-2)=%t Up(a)=%t, want true false false true",
						r.p.Alive("w-1"), r.p.Gone("w-1"), r.p.Draining("w-2"), r.p.View().Up("a"))
				}
				r.noGone(t)
				// The last one draining: the upstream is down, no worker gone.
				drain2 := hb("w-2", 1, up("a"))
				drain2.Draining = true
				r.beat(t, drain2)
				waitFor(t, "Up(a) false", func() bool { return !r.p.View().Up("a") })
				r.noGone(t)
			},
		},
		{
			name: "goodbye from an unknown worker is ignored",
			run: func(t *testing.T, r *presenceRig) {
				bye := hb("w-x", 1)
				bye.Bye = true
				r.beat(t, bye)
				r.beat(t, hb("w-1", 1, up("a")))
				waitFor(t, "w-1 alive", func() bool { return r.p.Alive("w-1") })
				if r.p.Gone("w-x") {
					t.Error("Gone(w-x) for a worker never seen")
				}
				r.noGone(t)
			},
		},
		{
			name: "silence expires a worker",
			run: func(t *testing.T, r *presenceRig) {
				const intervalMs = 50
				quiet := hb("w-1", 1, up("a"))
				quiet.IntervalMs = intervalMs
				start := time.Now()
				r.beat(t, quiet)
				r.beat(t, hb("w-2", 1, up("a"))) // keeps a long interval
				waitFor(t, "w-1 alive", func() bool { return r.p.Alive("w-1") })
				r.left(t, "w-1", "OnGone after silence")
				elapsed := time.Since(start)
				if floor := proto.HeartbeatMisses * intervalMs * time.Millisecond; elapsed < floor {
					t.Errorf("w-1 expired after %v, before %d missed %dms intervals (%v)", elapsed, proto.HeartbeatMisses, intervalMs, floor)
				}
				if r.p.Alive("w-1") || !r.p.Gone("w-1") {
					t.Errorf("after silence: Alive=%t Gone=%t, want false, true", r.p.Alive("w-1"), r.p.Gone("w-1"))
				}
				if !r.p.Alive("w-2") {
					t.Error("w-2 expired with w-1")
				}
				if r.p.View().Up("a") != true {
					t.Error("Up(a) false with w-2 still up")
				}
			},
		},
		{
			name: "a heartbeat brings a gone worker back",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 1, up("a")))
				bye := hb("w-1", 1)
				bye.Bye = true
				r.beat(t, bye)
				r.left(t, "w-1", "OnGone after goodbye")
				r.beat(t, hb("w-1", 2, up("a")))
				waitFor(t, "w-1 back", func() bool { return r.p.Alive("w-1") })
				if r.p.Gone("w-1") {
					t.Error("Gone(w-1) after it came back")
				}
			},
		},
		{
			name: "restart calls OnGone but is not Gone",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 100, up("a")))
				r.beat(t, hb("w-1", 200, up("a")))
				// Gone must be false even while OnGone runs: the new
				// incarnation may already be taking calls.
				if g := recv(t, r.gone, "OnGone on restart"); g.worker != "w-1" || g.marked {
					t.Fatalf("OnGone(%q) with Gone=%t, want OnGone(w-1) with Gone=false", g.worker, g.marked)
				}
				waitFor(t, "new boot in the view", func() bool {
					w := r.p.View().Workers["w-1"]
					return w != nil && w.Boot == 200
				})
				if r.p.Gone("w-1") {
					t.Error("Gone(w-1) after a restart: new calls placed on it would fail")
				}
				if !r.p.Alive("w-1") {
					t.Error("w-1 not alive after a restart")
				}
			},
		},
		{
			name: "same boot is not a restart",
			run: func(t *testing.T, r *presenceRig) {
				for range 3 {
					r.beat(t, hb("w-1", 100, up("a")))
				}
				r.beat(t, hb("w-2", 1))
				waitFor(t, "w-2 alive", func() bool { return r.p.Alive("w-2") })
				r.noGone(t)
			},
		},
		{
			name: "suspect drops at once",
			run: func(t *testing.T, r *presenceRig) {
				r.beat(t, hb("w-1", 1, up("a")))
				waitFor(t, "w-1 alive", func() bool { return r.p.Alive("w-1") })
				r.p.Suspect("w-1")
				r.left(t, "w-1", "OnGone after Suspect")
				if r.p.Alive("w-1") || !r.p.Gone("w-1") || r.p.View().Up("a") {
					t.Errorf("after Suspect: Alive=%t Gone=%t Up(a)=%t", r.p.Alive("w-1"), r.p.Gone("w-1"), r.p.View().Up("a"))
				}
				r.p.Suspect("w-unknown") // not tracked: nothing happens
				r.beat(t, hb("w-1", 1, up("a")))
				waitFor(t, "w-1 back after a heartbeat", func() bool { return r.p.Alive("w-1") })
				if r.p.Gone("w-1") {
					t.Error("Gone(w-1) after it came back")
				}
				r.noGone(t)
			},
		},
		{
			name: "bad heartbeats are ignored",
			run: func(t *testing.T, r *presenceRig) {
				r.raw(t, "w-junk", []byte{0xc1, 0xff, 0x00})
				r.raw(t, "w-empty", nil)
				r.beat(t, hb("Bad Worker", 1, up("a")))
				r.beat(t, hb("", 1, up("a")))
				r.beat(t, hb("w-ok", 1, up("b")))
				// Heartbeats from one connection arrive in order: once w-ok
				// is in, the bad ones before it have been handled.
				waitFor(t, "w-ok alive", func() bool { return r.p.Alive("w-ok") })
				v := r.p.View()
				got := make([]string, 0, len(v.Workers))
				for id := range v.Workers {
					got = append(got, id)
				}
				slices.Sort(got)
				if diff := cmp.Diff([]string{"w-ok"}, got); diff != "" {
					t.Errorf("workers (-want +got):\n%s", diff)
				}
				if len(v.ByUpstream["a"]) != 0 {
					t.Errorf("ByUpstream[a] = %v, want none", ids(v.ByUpstream["a"]))
				}
				r.noGone(t)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newPresenceRig(t))
		})
	}
}

func TestBusPresenceOnChange(t *testing.T) {
	r := newPresenceRig(t)
	r.beat(t, hb("w-1", 1, up("a")))
	v := recv(t, r.changes, "OnChange after a join")
	if v.Workers["w-1"] == nil {
		t.Fatalf("OnChange view lacks w-1: %v", v.Workers)
	}
	if v != r.p.View() {
		t.Error("OnChange view is not the current snapshot")
	}
	r.beat(t, hb("w-1", 1, down("a")))
	v = recv(t, r.changes, "OnChange after a state flip")
	if v.Up("a") {
		t.Error("OnChange view still has a up")
	}
}

// TestBusPresenceSurvivesOwnReconnect: while the registry's own
// connection is down, silence says nothing about the workers; none is
// dropped (no OnGone) and they are live right after the reconnect.
func TestBusPresenceSurvivesOwnReconnect(t *testing.T) {
	port := natstest.RestartablePort(t)
	opts := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true}
	start := func() *server.Server {
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(5 * time.Second) {
			t.Fatal("server not ready")
		}
		return s
	}
	s := start()
	t.Cleanup(func() { s.Shutdown() })
	url := s.ClientURL()
	conn := func() *nats.Conn {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	p := NewPresence(conn(), nil)
	gone := make(chan string, 8)
	p.OnGone = func(w string) { gone <- w }
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	peer := conn()
	hb, _ := proto.Marshal(&proto.Heartbeat{Worker: "w1", Boot: 1, IntervalMs: 50})
	subj, _ := proto.EvtWorkerSubject("w1")
	stopBeats := make(chan struct{})
	beats := make(chan struct{})
	go func() { // a worker beating every 20 ms while it can
		defer close(beats)
		for {
			_ = peer.Publish(subj, hb)
			select {
			case <-stopBeats:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stopBeats); <-beats }()
	waitUntil(t, "w1 live", func() bool { return p.Alive("w1") })

	s.Shutdown()
	s.WaitForShutdown()
	// Down for several times the worker's 150 ms of allowed silence.
	downFor := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(downFor) {
		select {
		case w := <-gone:
			t.Fatalf("%s dropped while the registry's own connection was down", w)
		case <-time.After(20 * time.Millisecond):
		}
	}
	s = start()
	waitUntil(t, "reconnected", p.nc.IsConnected)
	if !p.Alive("w1") {
		t.Fatal("w1 not live right after the reconnect")
	}
	select {
	case w := <-gone:
		t.Fatalf("%s dropped across the reconnect", w)
	default:
	}
}

// waitUntil polls ok until it holds, failing after 10 s.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
