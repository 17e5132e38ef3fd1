package edge

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchyard-mcp/switchyard/internal/publicurl"
)

// wellKnownPRM is where RFC 9728 puts protected resource metadata: at the
// root for the origin, and with the resource's path appended for each
// endpoint (/.well-known/oauth-protected-resource/mcp for /mcp). Behind a
// public prefix (/tools) the edge names it under the prefix
// (/tools/.well-known/oauth-protected-resource/mcp).
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// resourceMetadataURL is the metadata URL of the endpoint r addressed, for
// the 401 challenge (MCP authorization: servers MUST name it in
// WWW-Authenticate): under the public prefix, where a proxy that serves
// the gateway under a prefix (and strips it) routes it to the edge.
func (s *Service) resourceMetadataURL(r *http.Request) string {
	return s.public.Origin(r).URL(wellKnownPRM + r.URL.EscapedPath())
}

// serveResourceMetadata serves the RFC 9728 document of the endpoint
// named by the path after wellKnownPRM ("" for the origin). Its resource
// is exactly the URL a client uses for that endpoint, as the go-sdk client
// checks (RFC 9728 section 3.3): the public origin and prefix
// (internal/publicurl), never an arbitrary Host header. The endpoint path
// may also come with the prefix in front (RFC 9728's own location,
// /.well-known/oauth-protected-resource/tools/mcp, for a proxy that routes
// /.well-known to the edge unstripped).
func (s *Service) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	// A public document: browser clients of any origin read it (RFC 9728
	// section 3 leaves CORS to the server).
	w.Header().Set("Access-Control-Allow-Origin", "*")
	o := s.public.Origin(r)
	rest := strings.TrimPrefix(r.URL.EscapedPath(), wellKnownPRM)
	if rest != "" && !isEndpointPath(rest) {
		p, ok := strings.CutPrefix(rest, o.Prefix)
		if o.Prefix == "" || !ok || !isEndpointPath(p) {
			http.NotFound(w, r)
			return
		}
		rest = p
	}
	servers := s.cfg.Auth.AuthorizationServers
	if len(servers) == 0 && s.cfg.Auth.JWT != nil {
		for _, is := range s.cfg.Auth.JWT.Issuers {
			servers = append(servers, is.Issuer)
		}
	}
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               o.URL(rest),
		AuthorizationServers:   servers,
		ScopesSupported:        s.cfg.Auth.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Switchyard MCP gateway",
	}
	auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
}

// isEndpointPath reports whether p is the path of an MCP endpoint the
// edge serves: /mcp, /sse, or either with one upstream segment.
func isEndpointPath(p string) bool {
	for _, base := range []string{"/mcp", "/sse"} {
		rest, ok := strings.CutPrefix(p, base)
		if ok && (rest == "" || (len(rest) > 1 && rest[0] == '/' && !strings.Contains(rest[1:], "/"))) {
			return true
		}
	}
	return false
}

// warnAdvertised logs, once at start, what a JWT-authenticating edge on a
// non-loopback address without auth.public_url names itself in its
// protected resource metadata: the address each connection arrived at
// (or a trusted proxy's forwarded host), which clients elsewhere may not
// reach and which is not the URL they use, so the OAuth flow of clients
// that check the metadata's resource (the go-sdk's) fails until
// public_url is set. addr is the bound listen address.
func (s *Service) warnAdvertised(addr string) {
	if s.public.Public() != nil || s.cfg.Auth.JWT == nil || publicurl.Loopback(addr) {
		return
	}
	advertised := "http://" + addr
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().IsUnspecified() {
		advertised = fmt.Sprintf("http://<the address each connection arrived at>:%d", ap.Port())
	}
	s.log.Warn("auth.public_url not set: protected resource metadata names the edge by its own address",
		"advertised", advertised, "trusted_proxies", len(s.cfg.TrustedProxies), "fix", "set auth.public_url to the URL clients use")
}
