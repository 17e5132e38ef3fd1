package worker

import (
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/grant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// grantKey is the fleet's grant key as provisioned on e's server.
func (e *env) grantKey() *grant.Key {
	e.t.Helper()
	kv, err := e.js.KeyValue(e.t.Context(), proto.BucketKeys)
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := kv.Get(e.t.Context(), proto.KeyGrants)
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := grant.NewKey(v.Value())
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

// granted sends req on the worker's grant subject, as an edge does on a
// route grant.
func (e *env) granted(req proto.Request) *proto.Reply {
	e.t.Helper()
	data, err := proto.Marshal(&req)
	if err != nil {
		e.t.Fatal(err)
	}
	subj, _ := proto.AppendGrantSubject(nil, e.svc.cfg.ID, proto.OpToolsCall)
	raw, err := e.caller.Request(e.t.Context(), string(subj), data)
	if err != nil {
		e.t.Fatalf("granted call: %v", err)
	}
	var r proto.Reply
	if err := proto.Unmarshal(raw, &r); err != nil {
		e.t.Fatal(err)
	}
	return &r
}

// TestWorkerGrantedCalls: a call on the grant subject runs only with a
// router's token for its tenant, upstream and tool that has not expired;
// every other one is answered not delivered (the call ran nowhere) and
// the upstream never sees it.
func TestWorkerGrantedCalls(t *testing.T) {
	h := serveHTTP(t, newUpstream(0), "streamable")
	e := startWorker(t, Config{}, streamableSpec("up", h.ts.URL))
	e.waitUp("up")
	k := e.grantKey()
	other, err := grant.NewKey(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Minute)
	call := func(tenant, tool string, tok []byte) proto.Request {
		r := toolCall("up", tool, `{"text":"hi"}`)
		r.Tenant, r.Grant = tenant, tok
		return r
	}
	wantText(t, e.granted(call("acme", "echo", k.Sign(nil, "acme", "up", "echo", exp))), "hi")

	for _, c := range []struct {
		name string
		req  proto.Request
	}{
		{"no token", call("acme", "echo", nil)},
		{"another tool than granted", call("acme", "fail", k.Sign(nil, "acme", "up", "echo", exp))},
		{"another tenant than granted", call("evil", "echo", k.Sign(nil, "acme", "up", "echo", exp))},
		{"another upstream than granted", call("acme", "echo", k.Sign(nil, "acme", "other", "echo", exp))},
		{"expired", call("acme", "echo", k.Sign(nil, "acme", "up", "echo", time.Now().Add(-time.Second)))},
		{"forged with another key", call("acme", "echo", other.Sign(nil, "acme", "up", "echo", exp))},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := h.toolCalls.Load()
			wantError(t, e.granted(c.req), proto.CodeNotDelivered, "route grant refused")
			if h.toolCalls.Load() != before {
				t.Fatal("the upstream was called")
			}
		})
	}

	// Only tools/call is granted.
	data, _ := proto.Marshal(&proto.Request{Method: "resources/read", Upstream: "up", Grant: k.Sign(nil, "", "up", "", exp)})
	subj, _ := proto.AppendGrantSubject(nil, e.svc.cfg.ID, proto.OpResourcesRead)
	raw, err := e.caller.Request(t.Context(), string(subj), data)
	var r proto.Reply
	if err != nil || proto.Unmarshal(raw, &r) != nil || r.Error == nil || r.Error.Code != proto.CodeMethodNotFound {
		t.Fatalf("resources/read on the grant subject: %v %+v", err, r.Error)
	}
}
