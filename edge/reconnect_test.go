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

// TestEdgeReconnectAnswersLostCalls: after the edge's NATS connection is
// cut and back, a call its worker no longer runs and whose reply it could
// not keep (its reply was lost; the worker answers Unsure) is answered
// with a retryable error within seconds, and a call the worker still runs
// goes on to its result.
func TestEdgeReconnectAnswersLostCalls(t *testing.T) {
	var nc *nats.Conn
	held := make(chan *nats.Msg, 4)
	g := newRigWith(t, func(m *nats.Msg) {
		var r proto.Request
		_ = proto.Unmarshal(m.Data, &r)
		w := "w-lost"
		if strings.Contains(string(r.Params), "keep") {
			w = "w-keep"
		}
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{w}}})
		held <- m
	}, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
	nc = g.nc
	g.initialize()
	// The workers' answers to "which of these do you still run": w-keep
	// runs everything, w-lost nothing.
	var asked atomic.Int32
	for _, w := range []string{"w-keep", "w-lost"} {
		subj, _ := proto.AppendWorkerSubject(nil, w, proto.OpInFlight)
		if _, err := nc.Subscribe(string(subj), func(m *nats.Msg) {
			asked.Add(1)
			var q proto.InFlight
			_ = proto.Unmarshal(m.Data, &q)
			if w == "w-lost" {
				q.Calls, q.Unsure = nil, true
			}
			data, _ := proto.Marshal(&q)
			_ = nc.Publish(m.Reply, data)
		}); err != nil {
			t.Fatal(err)
		}
	}
	type res struct {
		body string
		d    time.Duration
	}
	lostc, keepc := make(chan res, 1), make(chan res, 1)
	go func() {
		start := time.Now()
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"up__x","arguments":{"a":"lost"}}}`)
		lostc <- res{body, time.Since(start)}
	}()
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"up__x","arguments":{"a":"keep"}}}`)
		keepc <- res{body: body}
	}()
	var keep *nats.Msg
	for range 2 {
		select {
		case m := <-held:
			if strings.Contains(string(m.Data), "keep") {
				keep = m
			}
		case <-time.After(10 * time.Second):
			t.Fatal("calls not routed")
		}
	}
	// Both placed (their notes read) before the cut: a note lost in it
	// leaves its call unplaced, which the edge fails too.
	deadline := time.Now().Add(10 * time.Second)
	for {
		placed := 0
		for _, k := range g.e.caller.Pending() {
			if k.Worker() != "" {
				placed++
			}
		}
		if placed == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls placed", placed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Cut the edge's connection; it reconnects.
	cut := time.Now()
	g.cutEdge()
	r := <-lostc
	if !strings.Contains(r.body, `"code":-32064`) || !strings.Contains(r.body, "interrupted") {
		t.Fatalf("lost call answered %s", r.body)
	}
	if d := time.Since(cut); d > 10*time.Second {
		t.Fatalf("lost call answered %v after the cut", d)
	}
	if asked.Load() == 0 {
		t.Fatal("no worker was asked")
	}
	// The kept call still gets its reply, once the edge is back.
	deadline = time.Now().Add(10 * time.Second)
	for !g.e.nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("edge did not reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * recheckWithin)
	rep := natstest.Connect(t, g.srv)
	_ = respondKept(rep, keep.Reply)
	select {
	case r := <-keepc:
		if !strings.Contains(r.body, `"kept"`) {
			t.Fatalf("kept call answered %s", r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call the worker still ran got no answer")
	}
}

func respondKept(nc *nats.Conn, subj string) error {
	data, _ := proto.Marshal(&proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"kept"}]}`)})
	return nc.Publish(subj, data)
}

// TestEdgeReconnectResendsUndelivered: after a bus interruption, a call
// its worker says it never saw (and is sure of: it keeps its recent
// replies) did not run, so the edge places it again and the client gets
// its result, no error; a call whose kept reply the worker sent again
// completes with that reply.
func TestEdgeReconnectResendsUndelivered(t *testing.T) {
	g, held := placingRig(t, "w-1")
	nc := g.nc
	var resend atomic.Pointer[string] // the reply subject of the call answered from the keep
	resendsKept(t, nc, "w-1", &resend)
	never, kept := make(chan string, 1), make(chan string, 1)
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"up__x","arguments":{"a":"never"}}}`)
		never <- body
	}()
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"up__x","arguments":{"a":"done"}}}`)
		kept <- body
	}()
	for range 2 {
		select {
		case m := <-held:
			if strings.Contains(string(m.Data), "done") {
				to := m.Reply
				resend.Store(&to)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("calls not routed")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for placed := 0; placed < 2; {
		placed = 0
		for _, k := range g.e.caller.Pending() {
			if k.Worker() != "" {
				placed++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls placed", placed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.cutEdge()
	// The call the worker never saw comes again; this time it runs.
	select {
	case m := <-held:
		if !strings.Contains(string(m.Data), "never") {
			t.Fatalf("placed again: %s", m.Data)
		}
		_ = respondKept(nc, m.Reply)
	case <-time.After(10 * time.Second):
		t.Fatal("the call the worker never saw was not placed again")
	}
	for name, c := range map[string]chan string{"never seen": never, "kept": kept} {
		select {
		case body := <-c:
			if !strings.Contains(body, `"kept"`) {
				t.Fatalf("%s call answered %s", name, body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s call got no answer", name)
		}
	}
	select {
	case m := <-held:
		t.Fatalf("a call placed a third time: %s", m.Data)
	default:
	}
}

// TestEdgeUnplacedCallFails: a call no router places or answers (sent
// into a cut the edge's own connection did not see) is failed within two
// sweeps once it is lostAfter old, -32064, not left to the call timeout.
func TestEdgeUnplacedCallFails(t *testing.T) {
	g := newRigWith(t, func(*nats.Msg) {}, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
	g.initialize()
	start := time.Now()
	_, body, _ := g.post(`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
	if !strings.Contains(body, `"code":-32064`) || !strings.Contains(body, "no router placed") {
		t.Fatalf("unplaced call answered %s", body)
	}
	if d := time.Since(start); d > lostAfter+2*sweepEvery+time.Second {
		t.Fatalf("unplaced call answered after %v", d)
	}
}

// TestEdgeRechecksAfterWorkerReconnect: when a worker's heartbeat says it
// reconnected to NATS, the edge asks it about the calls placed on it
// before; one it never saw is placed again and completes.
func TestEdgeRechecksAfterWorkerReconnect(t *testing.T) {
	g, held := placingRig(t, "w-r")
	nc := g.nc
	hb := func(reconnects uint64) {
		subj, _ := proto.EvtWorkerSubject("w-r")
		data, _ := proto.Marshal(&proto.Heartbeat{Worker: "w-r", Boot: 7, IntervalMs: 200, Reconnects: reconnects})
		if err := nc.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
	}
	hb(0)
	var asked atomic.Int32
	subj, _ := proto.AppendWorkerSubject(nil, "w-r", proto.OpInFlight)
	if _, err := nc.Subscribe(string(subj), func(m *nats.Msg) {
		asked.Add(1)
		data, _ := proto.Marshal(&proto.InFlight{}) // knows none of them, and is sure
		_ = nc.Publish(m.Reply, data)
	}); err != nil {
		t.Fatal(err)
	}
	var reconnects atomic.Uint64
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the worker stays alive
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				hb(reconnects.Load())
			}
		}
	}()
	res := make(chan string, 1)
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
		res <- body
	}()
	select {
	case <-held: // placed on w-r, then lost on its way (never answered)
	case <-time.After(10 * time.Second):
		t.Fatal("call not routed")
	}
	waitUntil(t, "the placement note read", func() bool { p := g.e.caller.Pending(); return len(p) > 0 && p[0].Worker() != "" })
	reconnects.Store(1) // the worker reconnected
	// The heartbeats now say Reconnects 1: the edge asks, then places the
	// call again.
	select {
	case m := <-held:
		_ = respondKept(nc, m.Reply)
	case <-time.After(10 * time.Second):
		t.Fatal("the call the worker never saw was not placed again")
	}
	select {
	case body := <-res:
		if !strings.Contains(body, `"kept"`) {
			t.Fatalf("call answered %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	if asked.Load() == 0 {
		t.Fatal("the worker was not asked")
	}
}

// TestEdgeSweepReplacesLostCall: a call placed on a worker that never saw
// it (lost on a route into a cut no connection of the edge's or the
// worker's noticed) is placed again within two sweeps, and completes; one
// the worker says it runs is left alone.
func TestEdgeSweepReplacesLostCall(t *testing.T) {
	g, held := placingRig(t, "w-s")
	nc := g.nc
	var running atomic.Pointer[string] // the reply subject of the call the worker runs
	subj, _ := proto.AppendWorkerSubject(nil, "w-s", proto.OpInFlight)
	if _, err := nc.Subscribe(string(subj), func(m *nats.Msg) {
		var q proto.InFlight
		_ = proto.Unmarshal(m.Data, &q)
		var a proto.InFlight
		for _, c := range q.Calls {
			if r := running.Load(); r != nil && strings.HasSuffix(*r, "."+strconv.FormatUint(c.ID, 10)) {
				a.Calls = append(a.Calls, c)
			}
		}
		data, _ := proto.Marshal(&a)
		_ = nc.Publish(m.Reply, data)
	}); err != nil {
		t.Fatal(err)
	}
	res := make(chan string, 2)
	for i, arg := range []string{"runs", "lost"} {
		go func() {
			_, body, _ := g.post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(60+i) + `,"method":"tools/call","params":{"name":"up__x","arguments":{"a":"` + arg + `"}}}`)
			res <- body
		}()
	}
	var runs *nats.Msg
	for range 2 {
		select {
		case m := <-held:
			if strings.Contains(string(m.Data), "runs") {
				runs = m
				r := m.Reply
				running.Store(&r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("calls not routed")
		}
	}
	select {
	case m := <-held:
		if !strings.Contains(string(m.Data), "lost") {
			t.Fatalf("a running call was placed again: %s", m.Data)
		}
		_ = respondKept(nc, m.Reply)
	case <-time.After(4*sweepEvery + 2*time.Second):
		t.Fatal("the lost call was not placed again")
	}
	if body := <-res; !strings.Contains(body, `"kept"`) {
		t.Fatalf("placed again, answered %s", body)
	}
	_ = respondKept(nc, runs.Reply)
	if body := <-res; !strings.Contains(body, `"kept"`) {
		t.Fatalf("running call answered %s", body)
	}
}

// TestEdgeByeReplacesUntakenCall: a call still waiting on a worker after
// its Bye (the worker answers every call it took before saying Bye) never
// reached it: once the edge's inbox has caught up, it is placed again and
// completes, with no error.
func TestEdgeByeReplacesUntakenCall(t *testing.T) {
	var nc *nats.Conn
	held := make(chan *nats.Msg, 4)
	var routed atomic.Int32
	g := newRigWith(t, func(m *nats.Msg) {
		w := "w-b"
		if routed.Add(1) > 1 {
			w = "w-c" // the router no longer places on the worker that left
		}
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{w}}})
		held <- m
	}, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
	nc = g.nc
	g.initialize()
	hb := func(bye bool) {
		subj, _ := proto.EvtWorkerSubject("w-b")
		data, _ := proto.Marshal(&proto.Heartbeat{Worker: "w-b", Boot: 9, IntervalMs: 5000, Bye: bye})
		if err := nc.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
	}
	hb(false)
	waitUntil(t, "worker w-b seen", func() bool { return g.e.presence.View().Workers["w-b"] != nil })
	res := make(chan string, 1)
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
		res <- body
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("call not routed")
	}
	waitUntil(t, "the placement note read", func() bool { p := g.e.caller.Pending(); return len(p) > 0 && p[0].Worker() != "" })
	hb(true)
	select {
	case m := <-held:
		_ = respondKept(nc, m.Reply)
	case <-time.After(10 * time.Second):
		t.Fatal("the call the worker never took was not placed again")
	}
	if body := <-res; !strings.Contains(body, `"kept"`) {
		t.Fatalf("call answered %s", body)
	}
}

// TestEdgeFindsCallWhoseNoteWasLost: after a bus interruption, a call with
// no placement note (the note was lost with the reply) is looked for on
// every live worker; the one that ran it sends its kept reply again, and
// the call completes.
func TestEdgeFindsCallWhoseNoteWasLost(t *testing.T) {
	var nc *nats.Conn
	held := make(chan *nats.Msg, 4)
	g := newRigWith(t, func(m *nats.Msg) { held <- m }, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
	nc = g.nc
	g.initialize()
	subj, _ := proto.EvtWorkerSubject("w-k")
	beat, _ := proto.Marshal(&proto.Heartbeat{Worker: "w-k", Boot: 3, IntervalMs: 5000})
	_ = nc.Publish(subj, beat)
	var to atomic.Pointer[string]
	resendsKept(t, nc, "w-k", &to)
	waitUntil(t, "worker w-k seen", func() bool { return g.e.presence.View().Workers["w-k"] != nil })
	res := make(chan string, 1)
	go func() {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":81,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
		res <- body
	}()
	select {
	case m := <-held:
		r := m.Reply
		to.Store(&r)
	case <-time.After(10 * time.Second):
		t.Fatal("call not routed")
	}
	g.cutEdge()
	select {
	case body := <-res:
		if !strings.Contains(body, `"kept"`) {
			t.Fatalf("call answered %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
}

// resendsKept answers in_flight questions to worker as a worker that kept
// the reply of the call whose reply subject *to holds: it sends that reply
// again and lists it in Resent; it knows no other call.
func resendsKept(t *testing.T, nc *nats.Conn, worker string, to *atomic.Pointer[string]) {
	t.Helper()
	subj, _ := proto.AppendWorkerSubject(nil, worker, proto.OpInFlight)
	if _, err := nc.Subscribe(string(subj), func(m *nats.Msg) {
		var q, a proto.InFlight
		_ = proto.Unmarshal(m.Data, &q)
		for _, c := range q.Calls {
			if r := to.Load(); r != nil && strings.HasSuffix(*r, "."+strconv.FormatUint(c.ID, 10)) {
				_ = respondKept(nc, *r)
				a.Resent = append(a.Resent, c)
			}
		}
		data, _ := proto.Marshal(&a)
		_ = nc.Publish(m.Reply, data)
	}); err != nil {
		t.Fatal(err)
	}
}

// cutEdge has the NATS server drop the edge's connection; the edge
// reconnects.
func (g *rig) cutEdge() {
	g.t.Helper()
	cid, err := g.e.nc.GetClientID()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := g.srv.DisconnectClientByID(cid); err != nil {
		g.t.Fatal(err)
	}
}

// TestEdgeReplacesUnplacedCall: a call sent to a router by name that no
// worker knows and no note came for, while that router said well after it
// that it had nothing in hand, was lost on its way (the router never got
// it, or its forward was lost with a connection): it is placed again and
// completes. A router that fell silent, or keeps reporting a backlog, may
// place it yet: the call fails instead, "may still run".
func TestEdgeReplacesUnplacedCall(t *testing.T) {
	for _, router := range []string{"clear", "silent", "backlog"} {
		t.Run(router, func(t *testing.T) {
			var nc *nats.Conn
			var got atomic.Int32
			g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
			nc = g.nc
			sub, err := nc.Subscribe(proto.RouterRouteSubjects("r-1"), func(m *nats.Msg) {
				if got.Add(1) == 1 {
					return // lost: no note, no reply
				}
				reply(nc, m, &proto.Reply{Result: []byte(`{"content":[{"type":"text","text":"placed again"}]}`)})
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			stop := make(chan struct{})
			defer close(stop)
			go func() { // the router's heartbeats
				subj, _ := proto.EvtRouterSubject("r-1")
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					sent := got.Load() > 0
					if router == "silent" && sent {
						return
					}
					data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: "r-1", Boot: 5, IntervalMs: 100, Backlog: router == "backlog" && sent})
					_ = nc.Publish(subj, data)
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			}()
			waitUntil(t, "router r-1 live", func() bool { return g.e.routers.Live("r-1") })
			g.initialize()
			_, body, _ := g.post(`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
			switch {
			case router == "clear" && (!strings.Contains(body, "placed again") || got.Load() != 2):
				t.Fatalf("call answered %s after %d sends, want the second send's answer", body, got.Load())
			case router != "clear" && (!strings.Contains(body, `"code":-32064`) || got.Load() != 1):
				t.Fatalf("call answered %s after %d sends, want -32064 and one send", body, got.Load())
			}
		})
	}
}

// placingRig is an initialized rig whose router, known to the edge by
// name ("r-t", heartbeating with no backlog), places every call on worker
// (its placement note) and hands it to held, unanswered; calls time out
// after a minute.
func placingRig(t *testing.T, worker string) (*rig, chan *nats.Msg) {
	held := make(chan *nats.Msg, 8)
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
	nc := g.nc
	namedRouter(t, g, "r-t", func(m *nats.Msg) {
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{worker}}})
		held <- m
	})
	g.initialize()
	return g, held
}

// namedRouter has handle take the calls the rig's edge sends router id by
// name, and sends id's heartbeats (no backlog) every 100 ms until the test
// ends; it returns once the edge counts the router live.
func namedRouter(t *testing.T, g *rig, id string, handle nats.MsgHandler) {
	t.Helper()
	sub, err := g.nc.Subscribe(proto.RouterRouteSubjects(id), handle)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done; _ = sub.Unsubscribe() })
	go func() {
		defer close(done)
		subj, _ := proto.EvtRouterSubject(id)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: id, Boot: 5, IntervalMs: 100})
			_ = g.nc.Publish(subj, data)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	waitUntil(t, "router "+id+" live", func() bool { return g.e.routers.Live(id) })
}

// TestEdgeSweepKeepsCallOfBusyRouter: a placed call its worker never saw
// is not placed again while the router that placed it has not said, since,
// that it had nothing in hand: its forward may wait in the router's
// reconnect buffer, and would run the call a second time. It fails,
// "may have run", and was sent once.
func TestEdgeSweepKeepsCallOfBusyRouter(t *testing.T) {
	g := newRigWith(t, nil, &rigOpts{cfg: func(c *Config) { c.CallTimeout = 60 * time.Second }})
	nc := g.nc
	var sent atomic.Int32
	sub, err := nc.Subscribe(proto.RouterRouteSubjects("r-b"), func(m *nats.Msg) {
		sent.Add(1)
		_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{"w-b"}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // heartbeats that report a backlog once the call is in
		subj, _ := proto.EvtRouterSubject("r-b")
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: "r-b", Boot: 5, IntervalMs: 100, Backlog: sent.Load() > 0})
			_ = nc.Publish(subj, data)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	waitUntil(t, "router r-b live", func() bool { return g.e.routers.Live("r-b") })
	subj, _ := proto.AppendWorkerSubject(nil, "w-b", proto.OpInFlight)
	if _, err := nc.Subscribe(string(subj), func(m *nats.Msg) {
		data, _ := proto.Marshal(&proto.InFlight{}) // never saw it, and is sure
		_ = nc.Publish(m.Reply, data)
	}); err != nil {
		t.Fatal(err)
	}
	g.initialize()
	_, body, _ := g.post(`{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`)
	if !strings.Contains(body, `"code":-32064`) || sent.Load() != 1 {
		t.Fatalf("call answered %s after %d sends, want -32064 and one send", body, sent.Load())
	}
}
