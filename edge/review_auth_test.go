package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Adversarial review of issue 5 (tenancy, authentication, policy,
// limits) at the edge. Each test states the defect it showed; each failed
// until its fix landed, and guards it since.

// rawDo sends one request to base+path with the given Host (""; the
// listener's) and headers (name, value pairs; "Authorization" may repeat).
func rawDo(t *testing.T, base, path, host, method, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestReviewJWTAudienceFromHostHeader: with no PublicURL configured (the
// default), the edge accepts as audience "http://" + the request's Host
// header + the path (authJWT → publicBase). The Host header is the
// client's to choose, so a token the trusted IdP issued for ANOTHER
// resource server (aud "http://other-mcp.example/mcp", RFC 8707) is
// accepted by the gateway when replayed with "Host: other-mcp.example":
// exactly the token confusion the audience check exists to prevent (MCP
// authorization: servers MUST validate that tokens were issued for them).
func TestReviewJWTAudienceFromHostHeader(t *testing.T) {
	e := newAuthEnv(t, false, nil) // PublicURL ""
	foreign := "Bearer " + e.idp.Token(t, map[string]any{"sub": "mallory", "org": "acme", "aud": "http://other-mcp.example/mcp"})
	// Presented honestly, it is refused.
	code, h, b := rawDo(t, e.base, "/mcp", "", http.MethodPost, initBody, "Authorization", foreign)
	check401(t, e, "/mcp", code, h, b, "invalid_token")
	// With the other server's Host, it must be refused too. (Served
	// in-process: the rig listens on loopback, where the SDK refuses
	// non-loopback Host names after the edge authenticated; an edge on a
	// public address has no such check.)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://other-mcp.example/mcp", strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", foreign)
	rec := httptest.NewRecorder()
	e.g.e.handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("a token for http://other-mcp.example/mcp, replayed with Host: other-mcp.example, got %d %.200s; want 401", rec.Code, rec.Body.String())
	}
}

// TestReviewTwoAuthorizationHeaders: Authorization is a singleton field
// (RFC 9110 section 11.6.2); a request carrying two is malformed. The
// edge authenticates the first and ignores the second, so a proxy or WAF
// in front that checks the last one (many do) and the edge disagree on
// who the caller is. It should be refused (400 invalid_request, RFC 6750
// section 3.1), whichever tenant either names.
func TestReviewTwoAuthorizationHeaders(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	code, _, b := rawDo(t, e.base, "/mcp", "", http.MethodPost, initBody,
		"Authorization", "Bearer "+e.keys["alice"], "Authorization", "Bearer "+e.keys["carol"])
	if code == http.StatusOK {
		t.Fatalf("two Authorization headers (acme's and beta's keys) were accepted: %d %.200s", code, b)
	}
}

// bridgeTenants are two tenants for the bridge test: acme (alice) sees
// every upstream, beta (carol) sees none of the rig's.
func bridgeEnv(t *testing.T) (*rig, map[string]string) {
	t.Helper()
	keys, recs := mintKeys(t)
	snap := tenancy.NewSnapshot(authTenants(false), recs)
	var nc *nats.Conn
	g := newRigWith(t, chattyWorker(t, &nc), &rigOpts{tenancy: tenancy.Static{Snap: snap}})
	nc = g.nc
	return g, keys
}

// TestReviewBridgeStateCrossTenant: a 2026-07-28 call suspended for input
// (requestState "sy-bridge:<token>") is resumed by whoever presents the
// token: edge.resume compares method, view and name, not the tenant or
// the principal. Carol of tenant beta, which does not even see upstream
// "up", resumes alice's (acme) call of up__x, answers the elicitation and
// receives acme's result. A requestState is a bearer capability that
// clients log and proxies see; it must be bound to the tenant (and
// principal) that received it.
func TestReviewBridgeStateCrossTenant(t *testing.T) {
	g, keys := bridgeEnv(t)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	call := func(key, extra string) string {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{}`+extra+`,`+meta+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up__x", "Authorization", "Bearer "+key)
		return body
	}
	first := call(keys["alice"], "")
	var res struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(first), &res); err != nil || !strings.HasPrefix(res.Result.RequestState, bridgePrefix) {
		t.Fatalf("alice's first answer %s", first)
	}
	retry := `,"requestState":"` + res.Result.RequestState + `","inputResponses":{"` + inputKey + `":{"action":"accept","content":{"tags":["carol-was-here"]}}}`
	if got := call(keys["carol"], retry); strings.Contains(got, "carol-was-here") || !strings.Contains(got, "-32602") {
		t.Fatalf("carol (tenant beta) resumed alice's (tenant acme) suspended call: %s", got)
	}
}

// TestReviewSSESessionCrossPrincipal: the legacy HTTP+SSE endpoint (/sse)
// does not bind its sessions to their caller. /mcp sessions are (the
// SDK's TokenInfo.UserID check, plus sessionMatches), but /sse requests go
// from endpoint() straight to the SDK's SSEHandler, which looks a POST's
// ?sessionid= up with no user check, and sessionMatches reads only
// Mcp-Session-Id. So bob (same tenant as alice, another principal) POSTs
// requests into alice's SSE session: they run as part of her session (its
// upstream session, its log level, its subscriptions; the answers go on
// her stream). TestAuthSessionBinding's promise ("sessions bound to
// caller") does not hold on /sse.
func TestReviewSSESessionCrossPrincipal(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	alice, bob := "Bearer "+e.keys["alice"], "Bearer "+e.keys["bob"]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	endpoint, _ := openLegacyStream(t, ctx, e.base, alice)
	// Alice's own POST is served.
	if code, _, b := rawDo(t, e.base, endpoint, "", http.MethodPost, initBody, "Authorization", alice); code != http.StatusAccepted {
		t.Fatalf("alice's initialize on her SSE session: %d %s", code, b)
	}
	// Bob's must not be.
	if code, _, b := rawDo(t, e.base, endpoint, "", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Authorization", bob); code != http.StatusNotFound && code != http.StatusForbidden {
		t.Fatalf("bob (another principal) POSTed into alice's SSE session: %d %s", code, b)
	}
}

// TestReviewListenSkipsLimits: the 2026-07-28 subscriptions/listen stream
// opens one upstream subscription (a resources/subscribe on the bus, a
// dedicated upstream session at a worker) per URI it names
// (listen.go upstreamSubscribe → roundTrip), without s.admit: a tenant
// whose rate limit is exhausted still puts any number of requests on the
// bus, and makes workers open any number of upstream sessions, through
// one request. docs/limits.md: "every request that goes on the bus for a
// client takes a ticket".
func TestReviewListenSkipsLimits(t *testing.T) {
	keys, recs := mintKeys(t)
	ts := authTenants(false)
	for i := range ts {
		if ts[i].Name == "acme" {
			ts[i].Limits = tenancy.Limits{Rate: 0.001, Burst: 1}
		}
	}
	snap := tenancy.NewSnapshot(ts, recs)
	var mu sync.Mutex
	subscribes := 0
	var nc *nats.Conn
	g := newRigWith(t, func(m *nats.Msg) {
		var req proto.Request
		_ = proto.Unmarshal(m.Data, &req)
		if req.Method == "resources/subscribe" {
			mu.Lock()
			subscribes++
			mu.Unlock()
		}
		reply(nc, m, &proto.Reply{Result: []byte(`{"content":[]}`)})
	}, &rigOpts{tenancy: tenancy.Static{Snap: snap}})
	nc = g.nc
	auth := "Bearer " + keys["alice"]
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},` + meta2026 + `}}`
	hdr := append(hdr2026("tools/call", "up__x"), "Authorization", auth)
	if _, body, _ := g.post(call, hdr...); strings.Contains(body, "-32069") {
		t.Fatalf("the first call was refused: %s", body)
	}
	if _, body, _ := g.post(call, hdr...); !strings.Contains(body, "-32069") {
		t.Fatalf("the second call was admitted (burst 1, rate 0.001/s): %s", body)
	}
	// The tenant is over its limit; a listen stream for 20 URIs.
	var uris []string
	for i := range 20 {
		uris = append(uris, `"file:///r`+string(rune('a'+i))+`"`)
	}
	listen := `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[` + strings.Join(uris, ",") + `]},` + meta2026 + `}}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(listen))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Del("Mcp-Name")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The acknowledgement comes once every subscription was placed.
	first := make([]byte, 512)
	n, _ := resp.Body.Read(first)
	mu.Lock()
	got := subscribes
	mu.Unlock()
	if got > 0 {
		t.Fatalf("a tenant over its rate limit put %d resources/subscribe on the bus through one listen stream (HTTP %d %.200s)", got, resp.StatusCode, first[:n])
	}
}

// TestReviewMalformedAuthorizationStatus: RFC 6750 section 3.1 answers
// invalid_request with 400, and a request using another scheme (Basic)
// "SHOULD NOT include an error code" in its 401 challenge; the MCP
// authorization spec (2025-11-25, Error Handling) also lists 400 for a
// malformed authorization request. The edge answers both with 401 and
// error="invalid_request".
func TestReviewMalformedAuthorizationStatus(t *testing.T) {
	e := newAuthEnv(t, false, nil)
	code, h, _ := rawDo(t, e.base, "/mcp", "", http.MethodPost, initBody, "Authorization", "Basic YWxpY2U6c2VjcmV0")
	if code == http.StatusUnauthorized && challenge(t, h)["error"] != "" {
		t.Errorf("Basic credentials: 401 with error=%q; RFC 6750 3.1: no error code for an unsupported scheme", challenge(t, h)["error"])
	}
	code, _, _ = rawDo(t, e.base, "/mcp", "", http.MethodPost, initBody, "Authorization", "Bearer a b")
	if code != http.StatusBadRequest {
		t.Errorf("malformed Bearer header: %d, RFC 6750 3.1 invalid_request is 400", code)
	}
}

// TestReviewSuspendedCallsEscapeInFlight: a 2026-07-28 call suspended for
// the client's input keeps its bus call, its worker and its upstream call
// open until the deadline (bridge.go suspend), but its in-flight ticket
// is released when the input_required answer goes out (runFast/forward
// defer done()). With max_in_flight 1, a client opens any number of
// concurrent upstream calls of an eliciting tool: each one suspends and
// frees the only slot for the next.
func TestReviewSuspendedCallsEscapeInFlight(t *testing.T) {
	keys, recs := mintKeys(t)
	ts := authTenants(false)
	for i := range ts {
		if ts[i].Name == "acme" {
			ts[i].Limits = tenancy.Limits{MaxInFlight: 1}
		}
	}
	var nc *nats.Conn
	g := newRigWith(t, chattyWorker(t, &nc), &rigOpts{tenancy: tenancy.Static{Snap: tenancy.NewSnapshot(ts, recs)}})
	nc = g.nc
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	call := func() string {
		_, body, _ := g.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__x","arguments":{},`+meta+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "up__x", "Authorization", "Bearer "+keys["alice"])
		return body
	}
	if first := call(); !strings.Contains(first, "input_required") {
		t.Fatalf("first call: %s", first)
	}
	// The first call is still open at the worker, waiting for its input.
	if second := call(); !strings.Contains(second, "-32069") {
		t.Fatalf("max_in_flight 1, one call open upstream, a second one was admitted: %.200s", second)
	}
}

// openLegacyStream opens a legacy SSE stream at base/sse with the
// Authorization header auth, until ctx ends; it returns the POST endpoint
// of the stream's endpoint event and the stream, read past that event.
func openLegacyStream(t *testing.T, ctx context.Context, base, auth string) (string, *bufio.Scanner) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(v, "sessionid=") {
			return strings.TrimSpace(v), sc
		}
	}
	t.Fatal("no endpoint event")
	return "", nil
}
