package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/syncbuf"
)

// peerRequest is a request to the edge's handler from peer (ip:port),
// arrived at local (ip:port) with Host host, and headers hdr (name, value,
// ...): what a server would hand the handler, with a peer of the test's
// choosing.
func peerRequest(t *testing.T, method, path, peer, local, host, body string, hdr ...string) *http.Request {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, "http://placeholder"+path, strings.NewReader(body))
	r.Host, r.RemoteAddr = host, peer
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(local))))
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// forwardedTo are a proxy's headers for https://gw.example.com/tools.
var forwardedTo = []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "gw.example.com", "X-Forwarded-Prefix", "/tools"}

// TestEdgePublicURLMetadata: the protected resource metadata's resource
// and the challenge's resource_metadata never echo a Host header an
// untrusted client chose; they follow X-Forwarded-* (and Forwarded) from
// trusted proxies only (loopback peers, edge.trusted_proxies), and
// auth.public_url, prefix included, wins over both.
func TestEdgePublicURLMetadata(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	plain := newAuthEnv(t, false, func(o *rigOpts) { o.trustedProxies = trusted })
	public := newAuthEnv(t, false, func(o *rigOpts) {
		o.trustedProxies = trusted
		o.auth.PublicURL = "https://gw.example.com/tools/"
	})
	const (
		loopback  = "127.0.0.1:40000"
		proxy     = "10.2.3.4:40000" // in trusted_proxies
		stranger  = "203.0.113.9:40000"
		atLocal   = "127.0.0.1:8080"
		atPrivate = "10.1.1.1:8080"
	)
	tests := []struct {
		name              string
		e                 *authEnv
		peer, local, host string
		hdr               []string
		want              string // the base of every URL
	}{
		{"forged Host from an untrusted peer", plain, stranger, atPrivate, "evil.example", nil, "http://10.1.1.1:8080"},
		{"forged Host on a loopback listener", plain, loopback, atLocal, "evil.example", nil, "http://127.0.0.1:8080"},
		{"loopback Host on a loopback listener", plain, loopback, atLocal, "localhost:8080", nil, "http://localhost:8080"},
		{"X-Forwarded-* from a loopback proxy", plain, loopback, atLocal, "127.0.0.1:8080", forwardedTo, "https://gw.example.com/tools"},
		{"X-Forwarded-* from a configured proxy", plain, proxy, atPrivate, "edge:8080", forwardedTo, "https://gw.example.com/tools"},
		{"X-Forwarded-* from an untrusted peer", plain, stranger, atPrivate, "evil.example", forwardedTo, "http://10.1.1.1:8080"},
		{"Forwarded from a loopback proxy", plain, loopback, atLocal, "127.0.0.1:8080",
			[]string{"Forwarded", `for=192.0.2.1;proto=https;host="gw.example.com"`}, "https://gw.example.com"},
		{"Forwarded from an untrusted peer", plain, stranger, atPrivate, "evil.example",
			[]string{"Forwarded", "proto=https;host=evil.example"}, "http://10.1.1.1:8080"},
		{"public_url over a forged Host", public, stranger, atPrivate, "evil.example", nil, "https://gw.example.com/tools"},
		{"public_url over a trusted proxy", public, loopback, atLocal, "127.0.0.1:8080",
			[]string{"X-Forwarded-Proto", "http", "X-Forwarded-Host", "other.example", "X-Forwarded-Prefix", "/other"}, "https://gw.example.com/tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.e.g.e.handler()
			for _, path := range []string{"/mcp", "/mcp/up", "/sse"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, peerRequest(t, http.MethodGet, wellKnownPRM+path, tt.peer, tt.local, tt.host, "", tt.hdr...))
				var md oauthex.ProtectedResourceMetadata
				if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &md) != nil {
					t.Fatalf("metadata %s: %d %s", path, rec.Code, rec.Body)
				}
				if md.Resource != tt.want+path {
					t.Fatalf("metadata %s: resource %q, want %q", path, md.Resource, tt.want+path)
				}
				// A refused credential's challenge names the same place.
				rec = httptest.NewRecorder()
				h.ServeHTTP(rec, peerRequest(t, http.MethodPost, path, tt.peer, tt.local, tt.host, initBody, append([]string{"Authorization", "Bearer a.b.c"}, tt.hdr...)...))
				if rec.Code != http.StatusUnauthorized {
					t.Fatalf("POST %s with a bad token: %d %s", path, rec.Code, rec.Body)
				}
				if got, want := challenge(t, rec.Header())["resource_metadata"], tt.want+wellKnownPRM+path; got != want {
					t.Fatalf("resource_metadata %q, want %q", got, want)
				}
			}
		})
	}

	// RFC 9728's own location of a prefixed resource's metadata (the
	// prefix after the well-known path) is served too, for a proxy that
	// routes /.well-known to the edge unstripped; other paths are not.
	for _, tc := range []struct {
		e      *authEnv
		peer   string
		hdr    []string
		path   string
		status int
		want   string
	}{
		{public, stranger, nil, "/tools/mcp/up", http.StatusOK, "https://gw.example.com/tools/mcp/up"},
		{public, stranger, nil, "/tools/sse", http.StatusOK, "https://gw.example.com/tools/sse"},
		{plain, loopback, forwardedTo, "/tools/mcp", http.StatusOK, "https://gw.example.com/tools/mcp"},
		{plain, stranger, forwardedTo, "/tools/mcp", http.StatusNotFound, ""},
		{public, stranger, nil, "/tools/other", http.StatusNotFound, ""},
		{public, stranger, nil, "/toolsx/mcp", http.StatusNotFound, ""},
	} {
		rec := httptest.NewRecorder()
		tc.e.g.e.handler().ServeHTTP(rec, peerRequest(t, http.MethodGet, wellKnownPRM+tc.path, tc.peer, atPrivate, "edge:8080", "", tc.hdr...))
		var md oauthex.ProtectedResourceMetadata
		if rec.Code != tc.status || tc.status == http.StatusOK && (json.Unmarshal(rec.Body.Bytes(), &md) != nil || md.Resource != tc.want) {
			t.Fatalf("%s from %s: %d %s; want %d, resource %q", wellKnownPRM+tc.path, tc.peer, rec.Code, rec.Body, tc.status, tc.want)
		}
	}
}

// TestEdgePublicURLAudience: with a public prefix, the URL a JWT may name
// as its audience (RFC 8707: the endpoint's URL under a configured
// audience) is the public one, prefix included.
func TestEdgePublicURLAudience(t *testing.T) {
	e := newAuthEnv(t, false, func(o *rigOpts) {
		o.auth.PublicURL = "https://gw.example.com/tools"
		jc := *o.auth.JWT
		jc.Issuers = []jwtauth.Issuer{jc.Issuers[0]}
		jc.Issuers[0].Audiences = []string{"https://gw.example.com/tools/mcp"}
		o.auth.JWT = &jc
	})
	for _, tc := range []struct {
		aud  string
		want int
	}{
		{"https://gw.example.com/tools/mcp/up", http.StatusOK},
		{"https://gw.example.com/mcp/up", http.StatusUnauthorized},
	} {
		tok := "Bearer " + e.idp.Token(t, map[string]any{"sub": "alice", "org": "acme", "aud": tc.aud})
		if code, _, b := e.do(t, http.MethodPost, "/mcp/up", tok, "", initBody); code != tc.want {
			t.Fatalf("aud %s at /mcp/up: %d %.200s, want %d", tc.aud, code, b, tc.want)
		}
	}
}

// streamRecorder is a ResponseWriter a test can read while the handler
// still writes (an SSE stream).
type streamRecorder struct {
	hdr  http.Header
	mu   sync.Mutex
	body bytes.Buffer
	code int
}

func (w *streamRecorder) Header() http.Header { return w.hdr }
func (w *streamRecorder) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		w.code = code
	}
}
func (w *streamRecorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}
func (w *streamRecorder) Flush() {}
func (w *streamRecorder) snapshot() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.code, w.body.String()
}

// sseEndpoint serves a legacy SSE GET r on h and returns the data of its
// endpoint event (the first event), then ends the stream.
func sseEndpoint(t *testing.T, h http.Handler, r *http.Request) string {
	t.Helper()
	ctx, cancel := context.WithCancel(r.Context())
	w := &streamRecorder{hdr: http.Header{}}
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(w, r.WithContext(ctx)) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := w.snapshot()
		if code != 0 && code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", r.URL.Path, code, body)
		}
		if i := strings.Index(body, "event: endpoint\ndata: "); i >= 0 {
			if rest := body[i+len("event: endpoint\ndata: "):]; strings.Contains(rest, "\n") {
				return rest[:strings.IndexByte(rest, '\n')]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no endpoint event in %q", r.URL.Path, body)
		}
		select {
		case <-done:
			t.Fatalf("GET %s ended before its endpoint event: %q", r.URL.Path, body)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestEdgePublicURLSSEEndpoint: the legacy SSE transport's endpoint event
// is a path from the origin (clients refuse one of another origin) under
// the public prefix: a trusted proxy's X-Forwarded-Prefix, or
// auth.public_url's path, which wins; an untrusted peer's prefix is
// ignored.
func TestEdgePublicURLSSEEndpoint(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	plain := newAuthEnv(t, true, func(o *rigOpts) { o.trustedProxies = trusted })
	public := newAuthEnv(t, true, func(o *rigOpts) { o.auth.PublicURL = "https://gw.example.com/tools" })
	prefix := []string{"X-Forwarded-Prefix", "/tools"}
	for _, tc := range []struct {
		name string
		e    *authEnv
		peer string
		path string
		hdr  []string
		want string
	}{
		{"no prefix", plain, "127.0.0.1:40000", "/sse", nil, "/sse?sessionid="},
		{"a loopback proxy's prefix", plain, "127.0.0.1:40000", "/sse", prefix, "/tools/sse?sessionid="},
		{"a configured proxy's prefix", plain, "10.2.3.4:40000", "/sse/up", prefix, "/tools/sse/up?sessionid="},
		{"an untrusted peer's prefix", plain, "203.0.113.9:40000", "/sse", prefix, "/sse?sessionid="},
		{"public_url's prefix", public, "203.0.113.9:40000", "/sse/up", nil, "/tools/sse/up?sessionid="},
		{"public_url over a proxy's prefix", public, "127.0.0.1:40000", "/sse", []string{"X-Forwarded-Prefix", "/other"}, "/tools/sse?sessionid="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := "10.1.1.1:8080"
			if strings.HasPrefix(tc.peer, "127.") {
				local = "127.0.0.1:8080"
			}
			got := sseEndpoint(t, tc.e.g.e.handler(), peerRequest(t, http.MethodGet, tc.path, tc.peer, local, local, "", tc.hdr...))
			if !strings.HasPrefix(got, tc.want) || len(got) == len(tc.want) {
				t.Fatalf("endpoint %q, want %q and a session id", got, tc.want)
			}
		})
	}
	// Over a real connection (a loopback peer): the event reaches the
	// client with the prefix, and the session it names (without the
	// prefix, as the proxy forwards it) takes the client's POSTs.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, plain.base+"/sse", nil)
	req.Header.Set("X-Forwarded-Prefix", "/tools/")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var endpoint string
	sc := bufio.NewScanner(resp.Body)
	for endpoint == "" && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = d
		}
	}
	path, ok := strings.CutPrefix(endpoint, "/tools/sse?sessionid=")
	if !ok {
		t.Fatalf("endpoint %q, want /tools/sse?sessionid=...", endpoint)
	}
	post, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, plain.base+"/sse?sessionid="+path, strings.NewReader(initBody))
	post.Header.Set("Content-Type", "application/json")
	pr, err := http.DefaultClient.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	pr.Body.Close()
	if pr.StatusCode != http.StatusAccepted {
		t.Fatalf("POST to the announced session: %d", pr.StatusCode)
	}
}

// TestEdgePublicURLRedirect: ServeMux's redirect of an unclean path goes
// under the public prefix, so a client behind a prefix-stripping proxy
// stays in the gateway; from an untrusted peer the prefix is ignored.
func TestEdgePublicURLRedirect(t *testing.T) {
	e := newAuthEnv(t, true, nil)
	public := newAuthEnv(t, true, func(o *rigOpts) { o.auth.PublicURL = "https://gw.example.com/tools" })
	for _, tc := range []struct {
		e          *authEnv
		peer, path string
		hdr        []string
		want       string
	}{
		{e, "127.0.0.1:40000", "//mcp", nil, "/mcp"},
		{e, "127.0.0.1:40000", "//mcp", []string{"X-Forwarded-Prefix", "/tools"}, "/tools/mcp"},
		{e, "127.0.0.1:40000", "/a/../mcp/up?x=1", []string{"X-Forwarded-Prefix", "/tools"}, "/tools/mcp/up?x=1"},
		{e, "203.0.113.9:40000", "//mcp", []string{"X-Forwarded-Prefix", "/tools"}, "/mcp"},
		{public, "203.0.113.9:40000", "/sse//up", nil, "/tools/sse/up"},
	} {
		rec := httptest.NewRecorder()
		tc.e.g.e.handler().ServeHTTP(rec, peerRequest(t, http.MethodGet, tc.path, tc.peer, "10.1.1.1:8080", "edge", "", tc.hdr...))
		if rec.Code != http.StatusTemporaryRedirect || rec.Header().Get("Location") != tc.want {
			t.Fatalf("GET %s from %s: %d Location %q; want 307 to %q", tc.path, tc.peer, rec.Code, rec.Header().Get("Location"), tc.want)
		}
	}
	// A clean path is served, not redirected.
	rec := httptest.NewRecorder()
	e.g.e.handler().ServeHTTP(rec, peerRequest(t, http.MethodGet, "/healthz", "127.0.0.1:40000", "127.0.0.1:8080", "localhost", ""))
	if rec.Code != http.StatusOK {
		t.Fatalf("/healthz: %d", rec.Code)
	}
}

// TestEdgePublicURLStartWarning: an edge that verifies JWTs on a
// non-loopback address without auth.public_url says at start what it
// will advertise and that public_url should be set; on loopback, with
// public_url, or without JWTs it says nothing.
func TestEdgePublicURLStartWarning(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	jc := &jwtauth.Config{Issuers: []jwtauth.Issuer{{Issuer: "https://idp.example/", JWKSURL: "https://idp.example/jwks", Audiences: []string{"x"}}}}
	for _, tc := range []struct {
		name, addr, public string
		jwt                *jwtauth.Config
		want               string // "" for no warning
	}{
		{"all interfaces", "0.0.0.0:8080", "", jc, "http://<the address each connection arrived at>:8080"},
		{"one address", "10.1.2.3:8080", "", jc, "http://10.1.2.3:8080"},
		{"loopback", "127.0.0.1:8080", "", jc, ""},
		{"public_url", "0.0.0.0:8080", "https://gw.example.com", jc, ""},
		{"no JWT", "0.0.0.0:8080", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncbuf.Buffer
			s, err := New(Config{ID: "edge-w", Auth: AuthConfig{JWT: tc.jwt, PublicURL: tc.public},
				Tenancy: tenancy.Static{Snap: tenancy.NewSnapshot(nil, nil)}}, nc, slog.New(slog.NewTextHandler(&buf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			s.warnAdvertised(tc.addr)
			out := buf.String()
			if tc.want == "" && out != "" || tc.want != "" && (!strings.Contains(out, "auth.public_url not set") || !strings.Contains(out, tc.want)) {
				t.Fatalf("log %q, want a warning with %q (\"\": none)", out, tc.want)
			}
		})
	}
}
