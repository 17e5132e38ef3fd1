package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigAuth(t *testing.T) {
	clearEnv(t)
	good := `auth:
  public_url: https://gw.example.com
  scopes_supported: [mcp]
  jwt:
    refresh_interval: 5m
    issuers:
      - issuer: https://idp.example.com/
        jwks_url: https://idp.example.com/jwks
        audiences: [https://gw.example.com/mcp]
        leeway: 30s
        claims: [sub, org]
`
	var f File
	if err := Parse([]byte(good), &f); err != nil {
		t.Fatal(err)
	}
	c := f.Auth.JWTConfig()
	if c == nil || len(c.Issuers) != 1 || c.RefreshInterval != 5*time.Minute || c.Issuers[0].Leeway != 30*time.Second ||
		c.Issuers[0].Audiences[0] != "https://gw.example.com/mcp" || len(c.Issuers[0].Claims) != 2 {
		t.Fatalf("jwt config: %+v", c)
	}
	// A path prefix is allowed: the gateway served under /tools by a
	// proxy; so are trusted proxies.
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("auth: {public_url: 'https://gw.example.com/tools/'}\nedge: {trusted_proxies: [10.0.0.0/8, 192.168.1.10]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pf, err := Load(path)
	if err != nil {
		t.Fatalf("public_url with a path prefix: %v", err)
	}
	if p := pf.Edge.TrustedProxyPrefixes(); len(p) != 2 || p[1].String() != "192.168.1.10/32" {
		t.Fatalf("trusted proxies %v", p)
	}
	if (&AuthFile{}).JWTConfig() != nil {
		t.Fatal("no jwt section must mean no verifier")
	}

	for _, tc := range []struct{ name, body, want string }{
		{"public url with a query", "auth: {public_url: 'https://gw/mcp?x=1'}\n", "auth.public_url"},
		{"public url with an unclean path", "auth: {public_url: 'https://gw/a/../mcp'}\n", "auth.public_url"},
		{"public url with an escaped path", "auth: {public_url: 'https://gw/a%20b'}\n", "auth.public_url"},
		{"public url not http", "auth: {public_url: ftp://gw}\n", "auth.public_url"},
		{"authorization server", "auth: {authorization_servers: [not-a-url]}\n", "auth.authorization_servers[0]"},
		{"jwt without issuers", "auth: {jwt: {issuers: []}}\n", "auth.jwt"},
		{"jwt http jwks", "auth: {jwt: {issuers: [{issuer: a, jwks_url: 'http://idp/jwks', audiences: [x]}]}}\n", "auth.jwt"},
		{"unknown key", "auth: {jwks: x}\n", "jwks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
