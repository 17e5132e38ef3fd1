package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
	"github.com/switchyard-mcp/switchyard/internal/publicurl"
)

// AuthFile is the edge's authentication (key auth). API keys and the
// anonymous tenant are tenancy state (tenants, api_keys); this holds JWT
// issuers and what the protected resource metadata (RFC 9728) says.
//
//	auth:
//	  public_url: https://gw.example.com/tools  # resource = public_url + endpoint path
//	  authorization_servers: [https://idp.example.com/]   # default: the JWT issuers
//	  scopes_supported: [mcp]
//	  jwt:
//	    refresh_interval: 15m
//	    issuers:
//	      - issuer: https://idp.example.com/
//	        jwks_url: https://idp.example.com/.well-known/jwks.json
//	        audiences: [https://gw.example.com/mcp]
//	        algorithms: [RS256]                 # default RS256, ES256, EdDSA
//	        leeway: 30s
//	        groups_claim: groups
//	        claims: [sub, org]                  # default: every string claim
type AuthFile struct {
	// PublicURL is the URL clients reach the gateway at: scheme, host and
	// an optional path prefix ("https://host[:port]" or
	// "https://host/tools" behind a proxy that serves the gateway under
	// /tools); every URL and path the edge hands out is under it
	// (internal/publicurl). Empty: a trusted proxy's X-Forwarded-*
	// headers, else the address each connection arrived at.
	PublicURL string `yaml:"public_url"`
	// AuthorizationServers are listed in the metadata; empty means the
	// JWT issuers.
	AuthorizationServers []string `yaml:"authorization_servers"`
	// ScopesSupported are listed in the metadata.
	ScopesSupported []string `yaml:"scopes_supported"`
	// JWT enables bearer JWTs; nil: API keys only.
	JWT *JWTFile `yaml:"jwt"`
}

// JWTFile configures JWT verification (internal/jwtauth).
type JWTFile struct {
	Issuers []JWTIssuer `yaml:"issuers"`
	// RefreshInterval is how often key sets are fetched again. Default 15m.
	RefreshInterval Duration `yaml:"refresh_interval"`
}

// JWTIssuer is one trusted issuer; see jwtauth.Issuer for each field.
type JWTIssuer struct {
	Issuer      string   `yaml:"issuer"`
	JWKSURL     string   `yaml:"jwks_url"`
	Audiences   []string `yaml:"audiences"`
	Algorithms  []string `yaml:"algorithms"`
	Leeway      Duration `yaml:"leeway"`
	GroupsClaim string   `yaml:"groups_claim"`
	Claims      []string `yaml:"claims"`
	AllowHTTP   bool     `yaml:"allow_http"`
}

// JWTConfig returns the verifier configuration, or nil without a jwt
// section.
func (a *AuthFile) JWTConfig() *jwtauth.Config {
	if a.JWT == nil {
		return nil
	}
	c := &jwtauth.Config{RefreshInterval: time.Duration(a.JWT.RefreshInterval)}
	for _, is := range a.JWT.Issuers {
		c.Issuers = append(c.Issuers, jwtauth.Issuer{
			Issuer: is.Issuer, JWKSURL: is.JWKSURL, Audiences: is.Audiences,
			Algorithms: is.Algorithms, Leeway: time.Duration(is.Leeway),
			GroupsClaim: is.GroupsClaim, Claims: is.Claims, AllowHTTP: is.AllowHTTP,
		})
	}
	return c
}

// validate reports every problem of the auth section.
func (a *AuthFile) validate() []error {
	var errs []error
	if a.PublicURL != "" {
		if _, err := publicurl.ParsePublicURL(a.PublicURL); err != nil {
			errs = append(errs, fmt.Errorf("auth.public_url: %q: %w", a.PublicURL, err))
		}
	}
	for i, s := range a.AuthorizationServers {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("auth.authorization_servers[%d]: %q is not an http(s) URL", i, s))
		}
	}
	if c := a.JWTConfig(); c != nil {
		if err := c.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("auth.jwt: %w", err))
		}
	}
	if a.JWT != nil && a.JWT.RefreshInterval < 0 {
		errs = append(errs, errors.New("auth.jwt.refresh_interval: must not be negative"))
	}
	return errs
}
