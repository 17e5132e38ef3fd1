package edge

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// fakeRouter heartbeats as router id and takes the calls sent to it by
// name with handle.
type fakeRouter struct {
	id    string
	nc    *nats.Conn
	stop  chan struct{}
	calls atomic.Int32
}

func startFakeRouter(t *testing.T, g *rig, id string, handle func(fr *fakeRouter, m *nats.Msg)) *fakeRouter {
	t.Helper()
	fr := &fakeRouter{id: id, nc: natstest.Connect(t, g.srv), stop: make(chan struct{})}
	if _, err := fr.nc.Subscribe(proto.RouterRouteSubjects(id), func(m *nats.Msg) {
		fr.calls.Add(1)
		handle(fr, m)
	}); err != nil {
		t.Fatal(err)
	}
	subj, _ := proto.EvtRouterSubject(id)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: id, IntervalMs: 100})
			_ = fr.nc.Publish(subj, data)
			select {
			case <-fr.stop:
				return
			case <-t.C:
			}
		}
	}()
	t.Cleanup(fr.die)
	return fr
}

// die stops the router's heartbeats without a Bye, as a kill -9 would.
func (fr *fakeRouter) die() {
	select {
	case <-fr.stop:
	default:
		close(fr.stop)
	}
}

// TestEdgeRouterDiesHoldingCalls: a call sent to a router that goes
// silent before placing it is answered within about its missed
// heartbeats, not at the call timeout: -32064, "may still run" (a silent
// router may be late, not dead, so the edge does not send it twice); the
// other calls run on the live router.
func TestEdgeRouterDiesHoldingCalls(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 30 * time.Second }})
	g.initialize()
	var answered atomic.Int32
	silent := startFakeRouter(t, g, "router-silent", func(fr *fakeRouter, m *nats.Msg) {}) // takes calls, never answers
	startFakeRouter(t, g, "router-good", func(fr *fakeRouter, m *nats.Msg) {
		answered.Add(1)
		reply(fr.nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"ok"}]}`)})
	})
	deadline := time.Now().Add(5 * time.Second)
	for !g.e.routers.Live("router-silent") || !g.e.routers.Live("router-good") {
		if time.Now().After(deadline) {
			t.Fatal("routers not seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Calls go round-robin: some land on the silent router. It dies.
	type res struct {
		d   time.Duration
		err string
	}
	out := make(chan res, 4)
	for i := range 4 {
		go func() {
			start := time.Now()
			code, body, _ := g.post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
			r := res{d: time.Since(start)}
			if code != 200 || !strings.Contains(body, `"ok"`) {
				r.err = body
			}
			out <- r
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if silent.calls.Load() == 0 {
		t.Fatal("no call reached the silent router")
	}
	silent.die()
	failed := 0
	for range 4 {
		r := <-out
		if r.d > 5*time.Second {
			t.Fatalf("call answered after %v: it waited for the dead router", r.d)
		}
		if r.err != "" {
			if !strings.Contains(r.err, `"code":-32064`) || !strings.Contains(r.err, "may still run") {
				t.Fatalf("call failed: %s", r.err)
			}
			failed++
		}
	}
	if failed != int(silent.calls.Load()) || int(answered.Load())+failed != 4 {
		t.Fatalf("%d failed, the silent router took %d, the good one answered %d", failed, silent.calls.Load(), answered.Load())
	}
	if g.e.routers.Live("router-silent") {
		t.Fatal("the dead router still counts live")
	}
}

// TestEdgeNoRouterNamesRole: with no router at all, a call fails at once
// naming the missing role.
func TestEdgeNoRouterNamesRole(t *testing.T) {
	g := newRigWith(t, nil, nil)
	g.initialize()
	_, e := g.call("tools/call", `{"name":"up__x","arguments":{}}`)
	if e == nil || e.Code != int64(proto.CodeUnavailable) || !strings.Contains(e.Message, "no router") || !strings.Contains(e.Message, "up__x") {
		t.Fatalf("got %+v", e)
	}
}

// TestEdgeRouterByeResendsUnplaced: a call held unplaced by a router that
// says Bye (it had nothing left to place: it ran nowhere) runs on another
// router.
func TestEdgeRouterByeResendsUnplaced(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 30 * time.Second }})
	g.initialize()
	var answered atomic.Int32
	took := make(chan struct{}, 8)
	leaving := startFakeRouter(t, g, "router-leaving", func(fr *fakeRouter, m *nats.Msg) { took <- struct{}{} })
	deadline := time.Now().Add(5 * time.Second)
	for !g.e.routers.Live("router-leaving") {
		if time.Now().After(deadline) {
			t.Fatal("router not seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := make(chan string, 1)
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
		out <- body
	}()
	<-took
	startFakeRouter(t, g, "router-good", func(fr *fakeRouter, m *nats.Msg) {
		answered.Add(1)
		reply(fr.nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"ok"}]}`)})
	})
	for !g.e.routers.Live("router-good") {
		time.Sleep(10 * time.Millisecond)
	}
	leaving.die()
	subj, _ := proto.EvtRouterSubject("router-leaving")
	data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: "router-leaving", Bye: true})
	_ = leaving.nc.Publish(subj, data)
	select {
	case body := <-out:
		if !strings.Contains(body, `"ok"`) || answered.Load() != 1 {
			t.Fatalf("answered %s (good router: %d)", body, answered.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call held by a router that said Bye was not sent on")
	}
}
