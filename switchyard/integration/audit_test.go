package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// auditConfig: acme records arguments and results, with a global and a
// tenant redact path; globex records neither. Both use API keys.
const auditConfig = `
upstreams:
  - name: fixture
    url: %s
tenants:
  - name: acme
    policy: {upstreams: [fixture], default: allow}
  - name: globex
    policy: {upstreams: [fixture], default: allow}
api_keys:
  - {tenant: acme, principal: alice, key_env: SY_TEST_AUDIT_ALICE}
  - {tenant: globex, principal: bob, key_env: SY_TEST_AUDIT_BOB}
audit:
  redact: [arguments.password]
  tenants:
    acme:
      record_arguments: true
      record_results: true
      redact: [arguments.profile.ssn]
`

// auditSearch asks the admin listener's audit API with the admin key
// key ("" for none).
func auditSearch(adminAddr, key string, q url.Values) ([]audit.Hit, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+adminAddr+"/audit/events?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/audit/events: %d %s", resp.StatusCode, body)
	}
	var page struct {
		Events []audit.Hit `json:"events"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("%v: %s", err, body)
	}
	return page.Events, nil
}

// TestIntegrationAudit: calls through the gateway by two tenants are
// found in the audit search (admin HTTP API and CLI) by tenant and tool,
// with who, what, outcome, durations, sizes and trace id; the recording
// tenant's arguments and result are redacted by path and scrubbed of
// secrets; the other tenant's are not recorded; and no API key, password
// or token is anywhere in the stream.
func TestIntegrationAudit(t *testing.T) {
	fxURL, _ := startFixtureHTTP(t)
	alice, bob := mintKey(t), mintKey(t)
	t.Setenv("SY_TEST_AUDIT_ALICE", alice)
	t.Setenv("SY_TEST_AUDIT_BOB", bob)
	g := startGateway(t, loadConfig(t, fmt.Sprintf(auditConfig, fxURL)))
	// The audit search needs an audit (or admin) key, on loopback too.
	auditKey, metricsKey := mintKey(t), mintKey(t)
	admCfg := &config.File{Admin: config.AdminFile{Listen: "127.0.0.1:0", Keys: []config.AdminKey{
		{KeyEnv: "SY_TEST_AUDIT_ADMIN_KEY", Scope: "audit"}, {KeyEnv: "SY_TEST_METRICS_ADMIN_KEY", Scope: "metrics"}}}}
	admCfg.Admin.Keys[0].SetKey(auditKey)
	admCfg.Admin.Keys[1].SetKey(metricsKey)
	adm, wait, err := app.StartAdmin(t.Context(), admCfg, g.set.Registry, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stop(); _ = wait() })
	if err := g.set.AddTo(adm, g.connect(t, proto.IdentityAudit)); err != nil {
		t.Fatal(err)
	}
	mcpURL := g.url + "/mcp"
	eventually(t, 20*time.Second, func() error {
		names, _, err := listAll(t.Context(), connectKey(t, mcpURL, v2025, alice, nil))
		if err != nil {
			return err
		}
		return hasAll(names, "fixture__echo", "fixture__fail")
	})

	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
	marker := fmt.Sprintf("audit-marker-%d", time.Now().UnixNano())
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	// acme's call, on the fast path (2026-07-28, stateless), with a
	// secret in every shape the audit must keep out.
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fixture__echo",`+
		`"arguments":{"text":%q,"password":"hunter2-secret","api_key":%q,"profile":{"ssn":"078-05-1120","city":"Oslo"},"note":"token %s"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		marker+" Bearer "+alice, alice, jwt)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", mcpURL, strings.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": v2026, "Mcp-Method": "tools/call", "Mcp-Name": "fixture__echo",
		"Authorization": "Bearer " + alice, "Traceparent": "00-" + traceID + "-00f067aa0ba902b7-01",
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(out, []byte(marker)) {
		t.Fatalf("call failed: %d %s", resp.StatusCode, out)
	}
	// acme on a 2025 session (initialize goes through the SDK path): a
	// tool error and an unknown tool.
	sa := connectKey(t, mcpURL, v2025, alice, nil)
	if res, err := sa.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__fail", Arguments: map[string]any{"reason": "boom"}}); err != nil || !res.IsError {
		t.Fatalf("fail: %v %+v", err, res)
	}
	if _, err := sa.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__nope", Arguments: map[string]any{}}); err == nil {
		t.Fatal("unknown tool answered")
	}
	// globex: nothing of its arguments or results is recorded.
	sb := connectKey(t, mcpURL, v2025, bob, nil)
	if _, err := sb.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": marker + "-globex", "password": "globex-pw"}}); err != nil {
		t.Fatal(err)
	}

	for key, want := range map[string]string{"": "401", metricsKey: "403"} {
		if _, err := auditSearch(adm.Addr(), key, url.Values{"tenant": {"acme"}}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("audit search with key %.12q: %v, want %s", key, err, want)
		}
	}

	// The specific call, found by tenant and tool.
	var hit audit.Hit
	eventually(t, 10*time.Second, func() error {
		hits, err := auditSearch(adm.Addr(), auditKey, url.Values{"tenant": {"acme"}, "tool": {"echo"}, "since": {"10m"}})
		if err != nil {
			return err
		}
		for _, h := range hits {
			if bytes.Contains(h.Arguments, []byte(marker)) {
				hit = h
				return nil
			}
		}
		return fmt.Errorf("acme's echo call not among %d events", len(hits))
	})
	if hit.Principal != "alice" || hit.Method != "tools/call" || hit.Upstream != "fixture" || hit.Name != "echo" ||
		hit.Outcome != "ok" || hit.TraceID != traceID || hit.Session || hit.EdgeID == "" {
		t.Errorf("event = %+v", hit)
	}
	if hit.Duration <= 0 || hit.UpstreamDuration <= 0 || hit.UpstreamDuration > hit.Duration || hit.RequestBytes == 0 || hit.ResponseBytes == 0 {
		t.Errorf("durations/sizes: %+v", hit)
	}
	var args map[string]any
	if err := json.Unmarshal(hit.Arguments, &args); err != nil {
		t.Fatal(err)
	}
	if args["password"] != "[REDACTED]" || args["api_key"] != "[REDACTED]" || args["profile"].(map[string]any)["ssn"] != "[REDACTED]" ||
		args["profile"].(map[string]any)["city"] != "Oslo" {
		t.Errorf("arguments not redacted by path and key: %s", hit.Arguments)
	}
	if !bytes.Contains(hit.Result, []byte(marker)) {
		t.Errorf("result not recorded: %s", hit.Result)
	}

	// Outcomes by filter: the tool error and the unknown tool.
	for _, c := range []struct{ outcome, name string }{{"tool_error", "fail"}, {"-32602", "nope"}} {
		hits, err := auditSearch(adm.Addr(), auditKey, url.Values{"tenant": {"acme"}, "outcome": {c.outcome}})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].Name != c.name || hits[0].Upstream != "fixture" || hits[0].Principal != "alice" || !hits[0].Session {
			t.Errorf("outcome %s: %+v", c.outcome, hits)
		}
	}
	// The session's initialize, through the SDK path.
	if hits, err := auditSearch(adm.Addr(), auditKey, url.Values{"tenant": {"acme"}, "method": {"initialize"}}); err != nil || len(hits) == 0 || hits[0].Outcome != "ok" {
		t.Errorf("initialize events: %v %+v", err, hits)
	}
	// globex: found by its own tenant, without arguments or result, and
	// not by acme's.
	hits, err := auditSearch(adm.Addr(), auditKey, url.Values{"tenant": {"globex"}, "tool": {"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Principal != "bob" || hits[0].Arguments != nil || hits[0].Result != nil {
		t.Errorf("globex: %+v", hits)
	}

	// The CLI finds the same call.
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	cli, err := exec.CommandContext(t.Context(), sy, "audit", "search", "--nats", g.ns.ClientURL(),
		"--creds", g.credsFile(t, proto.IdentityAudit), "--tenant", "acme", "--tool", "echo", "--json").Output()
	var page struct{ Events []audit.Hit }
	if err != nil || json.Unmarshal(cli, &page) != nil || len(page.Events) == 0 || page.Events[0].Seq != hit.Seq ||
		!bytes.Contains(page.Events[0].Arguments, []byte(marker)) {
		t.Errorf("CLI search: %v\n%s", err, cli)
	}

	// No secret anywhere in the stream.
	raw := streamBytes(t, g.connect(t, proto.IdentityAdmin))
	for _, secret := range []string{alice, bob, "hunter2-secret", "globex-pw", jwt, "078-05-1120"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the audit stream holds the secret %.12s...", secret)
		}
	}
	if !bytes.Contains(raw, []byte(marker)) {
		t.Error("stream bytes not read")
	}

	// The publisher's counters on the admin listener.
	mfs, err := scrape("http://" + adm.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if m := series(mfs, "switchyard_audit_events_published_total", nil); m == nil || m.GetCounter().GetValue() < 6 {
		t.Errorf("switchyard_audit_events_published_total: %v", m)
	}
}

// streamBytes returns every stored audit message's data, concatenated.
func streamBytes(t *testing.T, nc *nats.Conn) []byte {
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, audit.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m.Data...)
		for k, vs := range m.Header {
			all = append(all, k...)
			for _, v := range vs {
				all = append(all, v...)
			}
		}
	}
	return all
}
