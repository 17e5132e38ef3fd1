package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// browserPath is the Chromium the browser tests drive: SWITCHYARD_BROWSER
// (make test sets it, after `make chromium` installed the Debian
// package), else chromium on PATH; without one the test is skipped when
// run by hand, never under make test.
func browserPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SWITCHYARD_BROWSER"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium (make chromium installs it; make test runs this test)")
	}
	return p
}

// browserPage is what a browser client's page runs: an MCP session over
// streamable HTTP with fetch (initialize, notifications/initialized,
// tools/list), returning the session id the script could read (an exposed
// header), the tools' count, or the error.
const browserPage = `<!doctype html><html><body><script>
async function mcp(gw) {
  const hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"};
  const post = async (body, sid) => {
    const h = Object.assign({}, hdr);
    if (sid) h["Mcp-Session-Id"] = sid;
    return fetch(gw, {method: "POST", headers: h, body: JSON.stringify(body)});
  };
  try {
    let r = await post({jsonrpc: "2.0", id: 1, method: "initialize", params: {protocolVersion: "2025-11-25",
      capabilities: {}, clientInfo: {name: "browser", version: "1"}}});
    const sid = r.headers.get("Mcp-Session-Id");
    await r.text();
    if (!sid) return "no session id readable: HTTP " + r.status;
    r = await post({jsonrpc: "2.0", method: "notifications/initialized"}, sid);
    await r.text();
    r = await post({jsonrpc: "2.0", id: 2, method: "tools/list"}, sid);
    const text = await r.text();
    const data = text.startsWith("{") ? text : text.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5)).join("");
    return "ok " + JSON.parse(data).result.tools.length + " tools, session " + sid.length + " chars";
  } catch (e) {
    return "error " + e;
  }
}
</script></body></html>`

// TestIntegrationBrowserOrigins: a browser page from an allowed origin
// (edge.allowed_origins) runs an MCP session through the gateway (the CORS
// preflight answered, Mcp-Session-Id readable); a page from another
// origin is refused (its preflight gets 403, so the browser never sends
// the request). Headless Chromium, driven with chromedp.
func TestIntegrationBrowserOrigins(t *testing.T) {
	browser := browserPath(t)
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(browserPage))
	})
	allowed, other := httptest.NewServer(page), httptest.NewServer(page)
	t.Cleanup(allowed.Close)
	t.Cleanup(other.Close)
	g := startGateway(t, loadConfig(t, fmt.Sprintf("edge:\n  allowed_origins: [%q]\nupstreams:\n  - name: mem\n    url: %s\n",
		allowed.URL, up.URL)))
	eventually(t, 20*time.Second, func() error {
		cs := connect(t, g.url+"/mcp", v2025, nil)
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil || len(res.Tools) == 0 {
			return fmt.Errorf("tools %v: %v", res, err)
		}
		return nil
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser),
		chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU)
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	run := func(pageURL string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
			t.Fatalf("browser at %s: %v", pageURL, err)
		}
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("mcp(%q)", g.url+"/mcp"), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("browser at %s: %v", pageURL, err)
		}
		t.Logf("page at %s: %s", pageURL, out)
		return out
	}
	if out := run(allowed.URL); !strings.HasPrefix(out, "ok ") || !strings.Contains(out, "tools") {
		t.Errorf("the allowed origin's page: %s", out)
	}
	if out := run(other.URL); !strings.HasPrefix(out, "error ") {
		t.Errorf("another origin's page: %s, want the browser to refuse", out)
	}
	// What the browser was told, as a client without a browser sees it.
	for _, tc := range []struct {
		origin string
		status int
		acao   string
	}{{allowed.URL, http.StatusNoContent, allowed.URL}, {other.URL, http.StatusForbidden, ""}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, g.url+"/mcp", nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type, mcp-protocol-version, mcp-session-id")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Access-Control-Allow-Origin") != tc.acao {
			t.Errorf("preflight from %s: %d, Access-Control-Allow-Origin %q; want %d %q", tc.origin, resp.StatusCode,
				resp.Header.Get("Access-Control-Allow-Origin"), tc.status, tc.acao)
		}
		if tc.status == http.StatusNoContent && !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") {
			t.Errorf("preflight allows headers %q", resp.Header.Get("Access-Control-Allow-Headers"))
		}
	}
}
