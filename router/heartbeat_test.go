package router

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

// TestRouterHeartbeatAndOwnSubject: a ready router heartbeats, takes calls
// sent to it by name, and at its stop places what it was sent before its
// Bye, which is its last heartbeat.
func TestRouterHeartbeatAndOwnSubject(t *testing.T) {
	s := provisiontest.Start(t)
	src := &swapSource{}
	src.set(t, config.DefaultTenants()...)
	r, err := New(Config{ID: "router-hb", PageSize: 2, Tenancy: src, TenancyPoll: 20 * time.Millisecond}, natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, s)
	beats := make(chan proto.RouterHeartbeat, 64)
	if _, err := nc.Subscribe(proto.SubjEvtRouterAll, func(m *nats.Msg) {
		var hb proto.RouterHeartbeat
		if proto.Unmarshal(m.Data, &hb) == nil {
			beats <- hb
		}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case hb := <-beats:
		if hb.Router != "router-hb" || hb.Bye || hb.IntervalMs != int32(HeartbeatInterval/time.Millisecond) {
			t.Fatalf("heartbeat %+v", hb)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
	subj, _ := proto.AppendRouterRouteSubject(nil, "router-hb", config.DefaultTenant, proto.OpToolsList)
	req, _ := proto.Marshal(&proto.Request{Method: "tools/list", Tenant: config.DefaultTenant})
	msg, err := nc.Request(string(subj), req, 5*time.Second)
	if err != nil {
		t.Fatalf("a call sent by name: %v", err)
	}
	var rep proto.Reply
	if err := proto.Unmarshal(msg.Data, &rep); err != nil || rep.Error != nil {
		t.Fatalf("tools/list: %+v %v", rep.Error, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	var last proto.RouterHeartbeat
	for {
		select {
		case hb := <-beats:
			last = hb
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	if !last.Bye {
		t.Fatalf("last heartbeat %+v, want its Bye", last)
	}
	if _, err := nc.Request(string(subj), req, time.Second); err != nats.ErrNoResponders { //nolint:errorlint // nats.go's sentinel
		t.Fatalf("after the Bye the router still takes calls by name: %v", err)
	}
}
