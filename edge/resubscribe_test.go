package edge

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestEdgeResubscribesWhenWorkersChange: when a worker joins or goes, the edge sends
// resources/subscribe again for every URI its sessions are subscribed to
// (an unsubscribed one not), under the session's name, so the worker that
// now serves the session subscribes upstream; the URIs are in the
// session's record, and an edge that adopts the session knows them.
func TestEdgeResubscribesWhenWorkersChange(t *testing.T) {
	var nc *nats.Conn
	var mu sync.Mutex
	var subs []proto.Request
	a := newRigWith(t, func(m *nats.Msg) {
		var r proto.Request
		if proto.Unmarshal(m.Data, &r) == nil && r.Method == "resources/subscribe" {
			mu.Lock()
			subs = append(subs, r)
			mu.Unlock()
		}
		reply(nc, m, &proto.Reply{Result: []byte(`{}`)})
	}, nil)
	nc = a.nc
	a.initialize()
	for _, c := range []struct{ method, uri string }{
		{"resources/subscribe", "test://a"}, {"resources/subscribe", "test://b"}, {"resources/unsubscribe", "test://b"},
	} {
		if _, e := a.call(c.method, `{"uri":"`+c.uri+`"}`); e != nil {
			t.Fatalf("%s %s: %+v", c.method, c.uri, e)
		}
	}
	waitUntil(t, "the record's subscriptions", func() bool {
		rec, err := a.e.store.Load().Get(t.Context(), a.sid)
		return err == nil && slices.Equal(rec.Subs, []string{"test://a"})
	})
	b := newRigWith(t, nil, &rigOpts{server: a.srv, id: "edge-u"})
	b.sid = a.sid
	if _, e := b.call("ping", `{}`); e != nil {
		t.Fatalf("ping at B: %+v", e)
	}
	if got := b.e.sessions.get(a.sid).subURIs(); !slices.Equal(got, []string{"test://a"}) {
		t.Fatalf("the adopted copy's subscriptions: %v", got)
	}
	mu.Lock()
	subs = nil
	mu.Unlock()

	heartbeat := func(w string, bye bool) {
		t.Helper()
		subj, _ := proto.EvtWorkerSubject(w)
		data, _ := proto.Marshal(&proto.Heartbeat{Worker: w, Boot: 9, IntervalMs: 5000, Bye: bye,
			Upstreams: []proto.UpstreamState{{Name: "up", Up: true}}})
		if err := nc.Publish(subj, data); err != nil {
			t.Fatal(err)
		}
	}
	resent := func(what string) {
		t.Helper()
		waitUntil(t, "the subscription sent again: "+what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(subs) > 0
		})
		time.Sleep(2 * resubscribeDelay) // nothing more comes
		mu.Lock()
		defer mu.Unlock()
		// Once, by the origin: B holds a copy with no stream.
		if len(subs) != 1 || subs[0].Name != "test://a" || subs[0].Session != a.sid || subs[0].Edge != "edge-t" || string(subs[0].Params) != `{"uri":"test://a"}` {
			t.Fatalf("%s: subscribed again: %+v", what, subs)
		}
		subs = nil
	}
	// The first worker: the edges' first view, nothing moves.
	heartbeat("w-a", false)
	waitUntil(t, "worker w-a seen", func() bool { return a.e.presence.View().Workers["w-a"] != nil })
	time.Sleep(2 * resubscribeDelay)
	mu.Lock()
	if len(subs) != 0 {
		t.Fatalf("subscribed again with nothing moved: %+v", subs)
	}
	mu.Unlock()
	// A worker joins: sessions move to it.
	heartbeat("w-b", false)
	resent("a worker joined")
	// It goes with a Bye.
	heartbeat("w-b", true)
	resent("a worker went")
}
