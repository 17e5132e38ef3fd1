package edge

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// TestEdgeReconnectAnswersLostCalls: after the edge's NATS connection is
// cut and back, a call its worker no longer runs (its reply was lost) is
// answered with a retryable error within seconds, and a call the worker
// still runs goes on to its result.
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
				q.Calls = nil
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
	cid, err := g.e.nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.srv.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
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
