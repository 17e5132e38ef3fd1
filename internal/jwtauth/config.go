package jwtauth

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Defaults for the zero values of [Config] and [Issuer].
const (
	DefaultRefreshInterval    = 15 * time.Minute
	DefaultMinRefreshInterval = 30 * time.Second
	DefaultFetchTimeout       = 10 * time.Second
	DefaultMaxTokenBytes      = 16 << 10
	DefaultGroupsClaim        = "groups"
)

// defaultAlgorithms are the algorithms an [Issuer] accepts when its
// Algorithms is empty: asymmetric only.
var defaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// Config configures a [Verifier]. [New] keeps its own copy.
type Config struct {
	// Issuers lists the trusted token issuers; at least one is required
	// and their Issuer values must differ.
	Issuers []Issuer
	// RefreshInterval is how often every key set is fetched again in the
	// background. Zero means [DefaultRefreshInterval].
	RefreshInterval time.Duration
	// MinRefreshInterval is the least time between two fetches of one key
	// set forced by tokens (an unknown kid, or no set cached yet); a failed
	// background fetch is retried after it too. Zero means
	// [DefaultMinRefreshInterval].
	MinRefreshInterval time.Duration
	// FetchTimeout bounds one JWKS fetch. Zero means [DefaultFetchTimeout].
	FetchTimeout time.Duration
	// MaxTokenBytes is the longest token Verify looks at; longer ones are
	// [ErrMalformed]. Zero means [DefaultMaxTokenBytes].
	MaxTokenBytes int
	// HTTPClient fetches the key sets (for example with a private CA).
	// Nil means a client with FetchTimeout. Either way jwx's redirect
	// hardening (no HTTPS to HTTP downgrade, at most 5 redirects) applies.
	HTTPClient *http.Client
	// Logger receives background fetch failures at Warn. Nil discards.
	Logger *slog.Logger
}

// Issuer is one trusted token issuer.
type Issuer struct {
	// Issuer is the exact iss value of the issuer's tokens. Required.
	Issuer string
	// JWKSURL is where the issuer publishes its key set. Required; it must
	// be https unless AllowHTTP is set. Issuers may share one URL.
	JWKSURL string
	// Audiences lists the aud values accepted; a token must name at least
	// one of them. At least one is required.
	Audiences []string
	// Algorithms lists the accepted JWS algorithms (RS256, RS384, RS512,
	// PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, HS256, HS384,
	// HS512). Empty means RS256, ES256 and EdDSA; "none" is always refused,
	// and HS* work only with symmetric ("oct") keys of the key set.
	Algorithms []string
	// Leeway is the clock skew tolerated on exp, nbf and iat. Zero means
	// none.
	Leeway time.Duration
	// GroupsClaim names the claim holding the principal's groups, a string
	// or an array of strings. Empty means [DefaultGroupsClaim].
	GroupsClaim string
	// Claims lists the claims copied into [tenant.Principal.Claims] (each
	// a string or an array of strings; other values are skipped). Empty
	// means every top-level claim that is a string or an array of strings,
	// except GroupsClaim.
	Claims []string
	// AllowHTTP accepts an http JWKSURL. A key set fetched in clear text
	// can be replaced on the way, so use it only in development.
	AllowHTTP bool
}

// Validate reports every problem of c, joined with [errors.Join], or nil.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("jwtauth: "+format, args...))
	}
	if len(c.Issuers) == 0 {
		add("no issuers")
	}
	seen := make(map[string]bool, len(c.Issuers))
	for i := range c.Issuers {
		is := &c.Issuers[i]
		switch {
		case is.Issuer == "":
			add("issuers[%d]: issuer is empty", i)
		case seen[is.Issuer]:
			add("issuers[%d]: issuer %q listed twice", i, is.Issuer)
		}
		seen[is.Issuer] = true
		if err := checkJWKSURL(is.JWKSURL, is.AllowHTTP); err != nil {
			add("issuers[%d] (%s): %w", i, is.Issuer, err)
		}
		if len(is.Audiences) == 0 {
			add("issuers[%d] (%s): no audiences", i, is.Issuer)
		}
		for _, a := range is.Audiences {
			if a == "" {
				add("issuers[%d] (%s): empty audience", i, is.Issuer)
			}
		}
		for _, a := range is.Algorithms {
			if _, ok := lookupAlg(a); !ok {
				add("issuers[%d] (%s): unsupported algorithm %q", i, is.Issuer, a)
			}
		}
		if is.Leeway < 0 {
			add("issuers[%d] (%s): negative leeway", i, is.Issuer)
		}
		for _, n := range is.Claims {
			if n == "" {
				add("issuers[%d] (%s): empty claim name", i, is.Issuer)
			}
		}
	}
	if c.RefreshInterval < 0 || c.MinRefreshInterval < 0 || c.FetchTimeout < 0 {
		add("negative refresh interval or fetch timeout")
	}
	if c.MaxTokenBytes < 0 {
		add("negative max token bytes")
	}
	return errors.Join(errs...)
}

func checkJWKSURL(s string, allowHTTP bool) error {
	if s == "" {
		return errors.New("jwks url is empty")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("jwks url: %w", err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("jwks url %q has no host", s)
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	default:
		return fmt.Errorf("jwks url %q must be https", s)
	}
	return nil
}

// withDefaults returns a copy of c with the zero values replaced.
func (c *Config) withDefaults() Config {
	d := *c
	d.Issuers = make([]Issuer, len(c.Issuers))
	for i, is := range c.Issuers {
		is.Audiences = append([]string(nil), is.Audiences...)
		is.Claims = append([]string(nil), is.Claims...)
		if len(is.Algorithms) == 0 {
			is.Algorithms = defaultAlgorithms
		}
		is.Algorithms = append([]string(nil), is.Algorithms...)
		if is.GroupsClaim == "" {
			is.GroupsClaim = DefaultGroupsClaim
		}
		d.Issuers[i] = is
	}
	if d.RefreshInterval == 0 {
		d.RefreshInterval = DefaultRefreshInterval
	}
	if d.MinRefreshInterval == 0 {
		d.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if d.FetchTimeout == 0 {
		d.FetchTimeout = DefaultFetchTimeout
	}
	if d.MaxTokenBytes == 0 {
		d.MaxTokenBytes = DefaultMaxTokenBytes
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}
