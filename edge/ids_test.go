package edge

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestEdgeExactInSDK(t *testing.T) {
	for _, c := range []struct {
		id    string
		exact bool
	}{
		{`"abc"`, true}, {`7`, true}, {`-7`, true}, {`9007199254740992`, true},
		{`9007199254740993`, false}, {`-9007199254740993`, false}, {`18446744073709551616`, false},
		{`1.5`, false}, {`1e3`, false}, {`null`, true},
		{`{"a":1}`, true}, {`[1]`, true}, {`true`, true},
	} {
		if got := exactInSDK([]byte(c.id)); got != c.exact {
			t.Errorf("exactInSDK(%s) = %v, want %v", c.id, got, c.exact)
		}
	}
}

// TestEdgeIDsExactThroughSDK: requests the SDK serves (here: with a
// progress token) get their ids back byte for byte, even those a float64
// cannot hold, in JSON and SSE responses; a notifications/cancelled naming
// such an id cancels that call.
func TestEdgeIDsExactThroughSDK(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			var nc *nats.Conn
			g := newRigWith(t, func(m *nats.Msg) {
				reply(nc, m, &proto.Reply{Result: []byte(`{"content":[]}`)})
			}, &rigOpts{sse: sse, noFastPath: true})
			nc = g.nc
			g.initialize()
			for _, id := range []string{`9007199254740993`, `-12345678901234567890`, `1.5`, `"s-1"`, `42`} {
				code, body, _ := g.post(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"up__x","arguments":{},"_meta":{"progressToken":1}}}`)
				if code != 200 || !strings.Contains(body, `"id":`+id+`,`) && !strings.Contains(body, `"id":`+id+`}`) {
					t.Fatalf("id %s: HTTP %d %s", id, code, body)
				}
				if strings.Contains(body, "sy-id-") {
					t.Fatalf("id %s: alias leaked: %s", id, body)
				}
			}
		})
	}
	t.Run("cancel", func(t *testing.T) {
		var nc *nats.Conn
		g := newRigWith(t, func(m *nats.Msg) {
			_ = nc.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrPlaced: []string{"w-1"}}})
		}, &rigOpts{noFastPath: true})
		nc = g.nc
		cancels, err := g.nc.SubscribeSync("switchyard.v1.worker.w-1.cancel")
		if err != nil {
			t.Fatal(err)
		}
		g.initialize()
		go func() { // never answered: the SDK sends nothing for a cancelled request
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url,
				strings.NewReader(`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"up__x","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", g.sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(200 * time.Millisecond) // the call reaches the router
		if code, body, _ := g.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9007199254740993}}`); code != 202 {
			t.Fatalf("cancelled: HTTP %d %s", code, body)
		}
		if _, err := cancels.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("no cancel reached the worker: %v", err)
		}
	})
}

// TestEdgeInvalidIDsRefused: ids that are neither strings nor numbers are
// refused as the SDK refuses them, on every path.
func TestEdgeInvalidIDsRefused(t *testing.T) {
	for _, o := range []rigOpts{{}, {noFastPath: true}} {
		g := newRigWith(t, nil, &o)
		g.initialize()
		for _, id := range []string{`{"a":1}`, `[1]`, `true`} {
			code, body, _ := g.post(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
			if code != http.StatusBadRequest {
				t.Errorf("fast=%v id %s: HTTP %d %s, want 400", !o.noFastPath, id, code, body)
			}
		}
	}
}

// TestEdgeOriginChecked: a loopback listener refuses a foreign Origin
// (DNS rebinding), on the streamable and the legacy SSE endpoints.
func TestEdgeOriginChecked(t *testing.T) {
	g := newRig(t, nil)
	for _, c := range []struct {
		origin string
		want   int
	}{{"http://evil.example", http.StatusForbidden}, {"null", http.StatusForbidden}, {"http://localhost:3000", http.StatusOK}, {"http://127.0.0.1", http.StatusOK}} {
		code, body, _ := g.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "Origin", c.origin)
		if code != c.want {
			t.Errorf("Origin %s: HTTP %d %s, want %d", c.origin, code, body, c.want)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.Replace(g.url, "/mcp", "/sse", 1), nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("SSE with a foreign Origin: HTTP %d", resp.StatusCode)
	}
}

// TestEdgeDuplicateIDsAcrossPaths: an id in flight on the fast path is
// refused on the SDK path, and the other way round, as the SDK refuses an
// id in flight on it.
func TestEdgeDuplicateIDsAcrossPaths(t *testing.T) {
	g := newRig(t, func(*nats.Msg) {}) // never answers: calls stay in flight
	g.initialize()
	send := func(body string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url, strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Session-Id": g.sid, "Mcp-Protocol-Version": "2025-11-25"} {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	fast := `{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":{"name":"up__x","arguments":{}}}`
	slow := `{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":{"name":"up__x","arguments":{},"_meta":{"progressToken":1}}}`
	for _, c := range []struct{ name, first, second string }{
		{"fast then SDK", fast, slow},
		{"SDK then fast", slow, fast},
	} {
		id := strings.ReplaceAll(c.name, " ", "-")
		go send(fmt.Sprintf(c.first, id))
		time.Sleep(300 * time.Millisecond) // the first is in flight
		code, body, _ := g.post(fmt.Sprintf(c.second, id))
		if code != http.StatusBadRequest || !strings.Contains(body, "duplicate in-flight request ID") {
			t.Errorf("%s: HTTP %d %s", c.name, code, body)
		}
	}
}
