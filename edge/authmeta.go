package edge

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// wellKnownPRM is where RFC 9728 puts protected resource metadata: at the
// root for the origin, and with the resource's path appended for each
// endpoint (/.well-known/oauth-protected-resource/mcp for /mcp).
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// publicBase is the scheme and authority clients reach the edge at:
// AuthConfig.PublicURL, else the request's own.
func (s *Service) publicBase(r *http.Request) string {
	if s.cfg.Auth.PublicURL != "" {
		return strings.TrimRight(s.cfg.Auth.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// resourceMetadataURL is the metadata URL of the endpoint r addressed, for
// the 401 challenge (MCP authorization: servers MUST name it in
// WWW-Authenticate).
func (s *Service) resourceMetadataURL(r *http.Request) string {
	return s.publicBase(r) + wellKnownPRM + r.URL.EscapedPath()
}

// serveResourceMetadata serves the RFC 9728 document of the endpoint
// named by the path after wellKnownPRM ("" for the origin). Its resource
// is exactly the URL a client uses for that endpoint, as the go-sdk client
// checks (RFC 9728 section 3.3).
func (s *Service) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), wellKnownPRM)
	if rest != "" && !isEndpointPath(rest) {
		http.NotFound(w, r)
		return
	}
	servers := s.cfg.Auth.AuthorizationServers
	if len(servers) == 0 && s.cfg.Auth.JWT != nil {
		for _, is := range s.cfg.Auth.JWT.Issuers {
			servers = append(servers, is.Issuer)
		}
	}
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               s.publicBase(r) + rest,
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
