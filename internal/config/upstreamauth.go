package config

import (
	"fmt"
	"net/textproto"
	"strings"

	"github.com/switchyard-mcp/switchyard/proto"
)

// UpstreamAuth is how workers authenticate to an HTTP upstream
// (upstreams[].auth). It names where each secret is, never the secret:
// every worker serving the upstream reads the variables and files itself
// when it opens a session (see docs/upstream-auth.md), so the values are
// not in the file, in KV, on the bus or in --check-config output, and a
// variable that is unset where the configuration is validated is not an
// error here (it is the worker's: the upstream is reported down, naming
// it).
type UpstreamAuth struct {
	// BearerEnv names a variable holding a token sent as
	// "Authorization: Bearer <token>".
	BearerEnv string `yaml:"bearer_env,omitempty"`
	// BearerFile is a file holding such a token (at most one of
	// BearerEnv, BearerFile).
	BearerFile string `yaml:"bearer_file,omitempty"`
	// Headers are further static headers (an API key header, a tenant
	// header), each value from a variable or a file.
	Headers []UpstreamHeader `yaml:"headers,omitempty"`
	// Passthrough sends the client's own Authorization header on its
	// calls to this upstream instead of the injected one. Without it a
	// client's Authorization never reaches the upstream.
	Passthrough bool `yaml:"passthrough,omitempty"`
	// TokenExchange sends, on a client's calls, a token the authorization
	// server mints for this upstream in exchange for the client's own
	// (RFC 8693), in place of the injected Authorization. Nil: none.
	TokenExchange *TokenExchange `yaml:"token_exchange,omitempty"`
}

// TokenExchange is where and as whom a worker exchanges a client's token
// for one for the upstream (RFC 8693 section 2.1): the authorization
// server's token endpoint, the worker's client id there and its secret
// (from a variable or a file; none for a public client), and what the new
// token is for: audience, resource (RFC 8707), scope (space separated).
type TokenExchange struct {
	TokenURL         string `yaml:"token_url"`
	ClientID         string `yaml:"client_id"`
	ClientSecretEnv  string `yaml:"client_secret_env,omitempty"`
	ClientSecretFile string `yaml:"client_secret_file,omitempty"`
	Audience         string `yaml:"audience,omitempty"`
	Resource         string `yaml:"resource,omitempty"`
	Scope            string `yaml:"scope,omitempty"`
}

// UpstreamHeader is one static upstream header: Name, and its value from
// the variable Env or the file File (exactly one of them).
type UpstreamHeader struct {
	Name string `yaml:"name"`
	Env  string `yaml:"env,omitempty"`
	File string `yaml:"file,omitempty"`
}

// Spec converts a to its catalog form (nil for nil or an empty a, so
// that `auth: {}` and no auth give the same spec).
func (a *UpstreamAuth) Spec() *proto.UpstreamAuth {
	if a == nil || a.BearerEnv == "" && a.BearerFile == "" && len(a.Headers) == 0 && !a.Passthrough && a.TokenExchange == nil {
		return nil
	}
	s := &proto.UpstreamAuth{BearerEnv: a.BearerEnv, BearerFile: a.BearerFile, Passthrough: a.Passthrough}
	if x := a.TokenExchange; x != nil {
		s.TokenExchange = &proto.TokenExchange{TokenURL: x.TokenURL, ClientID: x.ClientID, ClientSecretEnv: x.ClientSecretEnv,
			ClientSecretFile: x.ClientSecretFile, Audience: x.Audience, Resource: x.Resource, Scope: x.Scope}
	}
	if len(a.Headers) > 0 {
		s.Headers = make([]proto.HeaderSource, len(a.Headers))
		for i, h := range a.Headers {
			s.Headers[i] = proto.HeaderSource{Name: h.Name, Env: h.Env, File: h.File}
		}
	}
	return s
}

// reservedHeaders are the headers an upstream auth header may not set:
// hop-by-hop headers, framing and content negotiation the transports set
// themselves, and Last-Event-ID; every "Mcp-" header (session id,
// protocol version, Mcp-Method, Mcp-Name, Mcp-Param-*) is refused too
// (see CheckUpstreamAuth). Keys are canonical.
var reservedHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Connection": true, "Content-Encoding": true,
	"Content-Length": true, "Content-Type": true, "Expect": true, "Host": true,
	"Keep-Alive": true, "Last-Event-Id": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true,
}

// CheckUpstreamAuth reports every problem of a as the auth of an upstream
// with transport t: auth only on HTTP transports (streamable, sse); at
// most one bearer source; each header a valid field name (RFC 9110
// token) with exactly one source, not reserved (hop-by-hop, framing,
// content negotiation, Host, Last-Event-ID, any Mcp-*), not twice, and
// not Authorization beside a bearer; variable names of [A-Za-z0-9_] not
// starting with a digit. Messages name fields and
// sources, never values (there are none here). nil a is fine. Workers
// call it again on the catalog entry before they read any secret.
func CheckUpstreamAuth(t string, a *proto.UpstreamAuth) []error {
	if a == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("auth: "+format, args...)) }
	if t != proto.TransportStreamable && t != proto.TransportSSE {
		bad("only for HTTP transports (streamable, sse); a stdio server takes its credentials from env")
	}
	if a.BearerEnv != "" && a.BearerFile != "" {
		bad("bearer_env and bearer_file: set only one")
	}
	if a.BearerEnv != "" && !validEnvName(a.BearerEnv) {
		bad("bearer_env: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", a.BearerEnv)
	}
	if x := a.TokenExchange; x != nil {
		switch {
		case a.Passthrough:
			bad("token_exchange and passthrough: set only one (both send a client's credential upstream)")
		case !strings.HasPrefix(x.TokenURL, "https://") && !strings.HasPrefix(x.TokenURL, "http://"):
			bad("token_exchange.token_url: %q must be an http(s) URL", x.TokenURL)
		case x.ClientID == "":
			bad("token_exchange.client_id: required")
		case x.ClientSecretEnv != "" && x.ClientSecretFile != "":
			bad("token_exchange.client_secret_env and client_secret_file: set only one")
		case x.ClientSecretEnv != "" && !validEnvName(x.ClientSecretEnv):
			bad("token_exchange.client_secret_env: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", x.ClientSecretEnv)
		}
	}
	bearer := a.BearerEnv != "" || a.BearerFile != ""
	seen := map[string]int{}
	for i, h := range a.Headers {
		name := textproto.CanonicalMIMEHeaderKey(h.Name)
		switch {
		case !validHeaderName(h.Name):
			bad("headers[%d]: name %q is not a valid header field name", i, h.Name)
		case reservedHeaders[name] || strings.HasPrefix(name, "Mcp-"):
			bad("headers[%d]: %s is set by the gateway's transport, not by auth", i, name)
		case name == "Authorization" && bearer:
			bad("headers[%d]: Authorization beside bearer_env/bearer_file: set only one", i)
		}
		if j, dup := seen[name]; dup && h.Name != "" {
			bad("headers[%d]: %s: the same header as headers[%d]", i, name, j)
		} else {
			seen[name] = i
		}
		switch {
		case h.Env != "" && h.File != "":
			bad("headers[%d] (%s): env and file: set only one", i, h.Name)
		case h.Env == "" && h.File == "":
			bad("headers[%d] (%s): env or file: required", i, h.Name)
		case h.Env != "" && !validEnvName(h.Env):
			bad("headers[%d] (%s): env: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", i, h.Name, h.Env)
		}
	}
	return errs
}

// checkAuth is CheckUpstreamAuth of u's auth, for Validate.
func (u Upstream) checkAuth() []error {
	return CheckUpstreamAuth(u.Transport, u.Auth.Spec())
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validHeaderName reports whether s is an RFC 9110 field name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
