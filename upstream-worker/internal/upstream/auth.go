package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/config"
)

// Upstream credentials (proto.UpstreamAuth; docs/upstream-auth.md).
//
// Each HTTP session reads the spec's variables and files when it is
// opened (the pool on every (re)connect, a dedicated session on its
// client session's first call), so a rotated file is used by the next
// session opened, without a restart. The headers go on every request of
// the session, whichever path sends it (the SDK's transports, the raw
// call path, the 2026 probe), by authRT at the bottom of the session's
// HTTP chain, and only to the upstream's own origin: a redirect or a
// legacy SSE message endpoint elsewhere gets none.
//
// A client's Authorization reaches the upstream only when the spec has
// Passthrough: the call's context carries it ([WithAuthorization]) and
// replaces the injected Authorization on the requests of that call. A
// dedicated session of such an upstream belongs to one client session,
// so its own requests (initialize, its GET stream, DELETE) carry its
// client's latest Authorization too (see session.clientAuth); the pool's
// never do.

// authKey is the context key of a call's client Authorization.
type authKey struct{}

// WithAuthorization returns ctx carrying v, the client's Authorization
// header value for a call to a passthrough upstream (proto.HdrAuthorization
// on the forwarded call). Every HTTP request the call sends to the
// upstream carries it as its Authorization header, if the upstream's spec
// has Auth.Passthrough; otherwise it is ignored. An empty v, one that is
// not a valid header value (control characters), and a Switchyard API key
// ("Bearer syk_..."), which is the gateway's credential and no
// upstream's, are ignored: the call then carries the injected
// credentials.
func WithAuthorization(ctx context.Context, v string) context.Context {
	if v == "" || !validHeaderValue(v) || gatewayKey(v) {
		return ctx
	}
	return context.WithValue(ctx, authKey{}, v)
}

// gatewayKey reports whether the Authorization value v presents a
// Switchyard API key.
func gatewayKey(v string) bool {
	scheme, tok, ok := strings.Cut(v, " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.HasPrefix(strings.TrimLeft(tok, " "), apikey.Prefix)
}

// authorization returns the client Authorization ctx carries, if any.
func authorization(ctx context.Context) (string, bool) {
	v, ok := ctx.Value(authKey{}).(string)
	return v, ok
}

// Passthrough reports whether the upstream takes its clients'
// Authorization on their calls (spec Auth.Passthrough).
func (u *Upstream) Passthrough() bool {
	return u.opts.Spec.Auth.ForwardsClientAuth() // a token exchange sends the exchanged token the same way
}

// loadCreds reads the spec's credentials: the headers every request of a
// session opened now carries (nil: none). Its errors name the field and
// the variable or file, never a value: they become the upstream's state.
func (u *Upstream) loadCreds() (http.Header, error) {
	a := u.opts.Spec.Auth
	if a == nil {
		return nil, nil
	}
	// The catalog entry may not come from a validated configuration.
	if errs := config.CheckUpstreamAuth(u.opts.Spec.Transport, a); len(errs) > 0 {
		return nil, fmt.Errorf("upstream credentials: %w", errors.Join(errs...))
	}
	var errs []error
	h := http.Header{}
	read := func(field, env, file string) string {
		v, err := readSecret(env, file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
		return v
	}
	if a.BearerEnv != "" || a.BearerFile != "" {
		if tok := read("bearer", a.BearerEnv, a.BearerFile); tok != "" {
			h.Set("Authorization", "Bearer "+tok)
		}
	}
	for i, hs := range a.Headers {
		if v := read(fmt.Sprintf("headers[%d] (%s)", i, hs.Name), hs.Env, hs.File); v != "" {
			h.Set(hs.Name, v)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("upstream credentials: %w", errors.Join(errs...))
	}
	return h, nil
}

// readSecret reads the value of variable env or file file (one is set),
// trimmed of surrounding whitespace. Errors name the source, never the
// value.
func readSecret(env, file string) (string, error) {
	var v, src string
	if env != "" {
		src = "variable " + env
		v = strings.TrimSpace(os.Getenv(env))
		if v == "" {
			return "", fmt.Errorf("%s is not set or empty", src)
		}
	} else {
		src = "file " + file
		b, err := os.ReadFile(file)
		if err != nil {
			// *PathError names the file and the cause only.
			return "", err
		}
		if v = strings.TrimSpace(string(b)); v == "" {
			return "", fmt.Errorf("%s is empty", src)
		}
	}
	if !validHeaderValue(v) {
		return "", fmt.Errorf("%s: not a valid header value (control characters)", src)
	}
	return v, nil
}

// validHeaderValue reports whether v may be sent as a header field value:
// no control characters but horizontal tab (net/http refuses them).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// withAuth returns base with session s's credentials added to its
// requests (base itself when the spec has no auth).
func (u *Upstream) withAuth(base http.RoundTripper, s *session) http.RoundTripper {
	if u.opts.Spec.Auth == nil {
		return base
	}
	return &authRT{base: base, hdr: s.creds, origin: u.origin, passthrough: u.Passthrough(), client: s.clientAuth}
}

// authRT adds an upstream session's credentials to each request for the
// upstream's origin: the injected headers, and on a passthrough upstream
// the client's Authorization in their place: the request's own call's
// (WithAuthorization), else, on a dedicated session, its client's latest.
// It never modifies the caller's request. Safe for concurrent use.
type authRT struct {
	base        http.RoundTripper
	hdr         http.Header // injected headers; never modified
	origin      *url.URL    // the credentials' scheme and host
	passthrough bool
	client      *atomic.Pointer[string] // dedicated passthrough session: its client's latest Authorization; else nil
}

func (a *authRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if !sameOrigin(r.URL, a.origin) {
		return a.base.RoundTrip(r)
	}
	client := ""
	if a.passthrough {
		if v, ok := authorization(r.Context()); ok {
			client = v
		} else if a.client != nil {
			if p := a.client.Load(); p != nil {
				client = *p
			}
		}
	}
	if len(a.hdr) == 0 && client == "" {
		return a.base.RoundTrip(r)
	}
	// A RoundTripper must not modify the request: send a shallow copy
	// with its own header map (the values are not modified, only keys
	// replaced).
	r2 := *r
	r2.Header = make(http.Header, len(r.Header)+len(a.hdr))
	for k, v := range r.Header {
		r2.Header[k] = v
	}
	for k, v := range a.hdr {
		r2.Header[k] = v
	}
	if client != "" {
		r2.Header["Authorization"] = []string{client}
	}
	return a.base.RoundTrip(&r2)
}

// sameOrigin reports whether u has o's scheme, host and port (a missing
// port is the scheme's default).
func sameOrigin(u, o *url.URL) bool {
	if u == nil || o == nil || !strings.EqualFold(u.Scheme, o.Scheme) || !strings.EqualFold(u.Hostname(), o.Hostname()) {
		return false
	}
	return port(u) == port(o)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// noteAuth records the client Authorization of a call on ctx as the
// latest of dedicated passthrough session s, for the session's own later
// requests (its GET stream reconnecting, DELETE), so they do not present
// an expired token the client has since replaced.
func (s *session) noteAuth(ctx context.Context) {
	if s.clientAuth == nil {
		return
	}
	if v, ok := authorization(ctx); ok {
		if p := s.clientAuth.Load(); p == nil || *p != v {
			s.clientAuth.Store(&v)
		}
	}
}

// parseOrigin parses the spec URL for authRT; nil (no request matches)
// if it does not parse: the transport then fails on the URL itself.
func parseOrigin(raw string) *url.URL {
	o, err := url.Parse(raw)
	if err != nil || o.Host == "" {
		return nil
	}
	return o
}
