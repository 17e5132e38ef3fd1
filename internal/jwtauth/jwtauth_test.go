package jwtauth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

var sentinels = []error{ErrMalformed, ErrExpired, ErrAudience, ErrIssuer, ErrSignature, ErrUnavailable}

// checkErr fails unless err wraps want and no other sentinel, leaves p
// empty and does not quote tok.
func checkErr(t *testing.T, err, want error, p *tenant.Principal, tok string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("Verify: got %v, want %v", err, want)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Errorf("Verify: %v also wraps %v", err, s)
		}
	}
	if p.Issuer != "" || len(p.Claims) != 0 || len(p.Groups) != 0 {
		t.Errorf("principal not empty after error: %+v", p)
	}
	noTokenIn(t, err.Error(), tok)
}

func TestJWTVerifyValid(t *testing.T) {
	for _, newKey := range []func(testing.TB, string) *testKey{newRSAKey, newECKey, newEdKey} {
		k := newKey(t, "k1")
		t.Run("alg="+k.alg, func(t *testing.T) {
			srv := newJWKSServer(t, k.jwk(t))
			v := newVerifier(t, srv.config())
			tok := k.token(t, claims(map[string]any{
				"aud":    []string{"other", testAudience},
				"email":  "u@example.test",
				"roles":  []string{"admin", "dev"},
				"mixed":  []any{"a", 1},
				"n":      42,
				"obj":    map[string]any{"a": "b"},
				"groups": []string{"g1", "g2"},
			}))
			p := &tenant.Principal{Issuer: "stale", Groups: []string{"stale"}}
			if err := v.Verify(t.Context(), tok, p); err != nil {
				t.Fatal(err)
			}
			want := &tenant.Principal{
				Issuer: testIssuer,
				Claims: []tenant.Claim{
					{Name: "aud", Value: "other"},
					{Name: "aud", Value: testAudience},
					{Name: "email", Value: "u@example.test"},
					{Name: "iss", Value: testIssuer},
					{Name: "roles", Value: "admin"},
					{Name: "roles", Value: "dev"},
					{Name: "sub", Value: "user-1"},
				},
				Groups: []string{"g1", "g2"},
			}
			if d := cmp.Diff(want, p); d != "" {
				t.Errorf("principal (-want +got):\n%s", d)
			}
		})
	}
}

func TestJWTVerifyRejects(t *testing.T) {
	k := newRSAKey(t, "k1")
	other := newRSAKey(t, "k1") // same kid, different key
	stranger := newRSAKey(t, "k9")
	ec := newECKey(t, "ec1")
	srv := newJWKSServer(t, k.jwk(t), ec.jwk(t))
	cfg := srv.config()
	cfg.MaxTokenBytes = 4096
	v := newVerifier(t, cfg)
	waitReady(t, v)

	good := k.token(t, claims(nil))
	parts := strings.Split(good, ".")
	now := time.Now()
	hdr := func(alg, kid string) map[string]any { return map[string]any{"alg": alg, "kid": kid, "typ": "JWT"} }
	b64 := func(s string) string { return enc.EncodeToString([]byte(s)) }
	pubDER, err := x509.MarshalPKIXPublicKey(k.raw.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	pkcs1PEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(k.raw.Public().(*rsa.PublicKey))})

	cases := []struct {
		name string
		tok  string
		want error
	}{
		{"missing", "", ErrMalformed},
		{"one part", "abcdefghijkl", ErrMalformed},
		{"two parts", parts[0] + "." + parts[1], ErrMalformed},
		{"four parts", good + ".abcd", ErrMalformed},
		{"bad base64 header", "!!" + parts[0] + "." + parts[1] + "." + parts[2], ErrMalformed},
		{"bad base64 payload", parts[0] + ".e$" + parts[1] + "." + parts[2], ErrMalformed},
		{"bad base64 signature", parts[0] + "." + parts[1] + "." + parts[2] + "*", ErrMalformed},
		{"padded", parts[0] + "==." + parts[1] + "." + parts[2], ErrMalformed},
		{"newline", parts[0] + "\n." + parts[1] + "." + parts[2], ErrMalformed},
		{"header garbled", parts[0] + "A." + parts[1] + "." + parts[2], ErrMalformed},
		{"header not JSON", b64("not json") + "." + parts[1] + "." + parts[2], ErrMalformed},
		{"header null", b64("null") + "." + parts[1] + "." + parts[2], ErrMalformed},
		{"payload not JSON", parts[0] + "." + b64("{nope") + "." + parts[2], ErrMalformed},
		{"payload array", parts[0] + "." + b64(`["iss"]`) + "." + parts[2], ErrMalformed},
		{"iss not a string", parts[0] + "." + b64(`{"iss":7}`) + "." + parts[2], ErrMalformed},
		{"too long", k.token(t, claims(map[string]any{"pad": strings.Repeat("x", 4096)})), ErrMalformed},
		{"no exp", k.token(t, claims(map[string]any{"exp": nil})), ErrMalformed},
		{"groups a number", k.token(t, claims(map[string]any{"groups": 3})), ErrMalformed},
		{"groups mixed", k.token(t, claims(map[string]any{"groups": []any{"a", 3}})), ErrMalformed},
		{"expired", k.token(t, claims(map[string]any{"exp": now.Add(-time.Minute).Unix()})), ErrExpired},
		{"nbf in future", k.token(t, claims(map[string]any{"nbf": now.Add(time.Minute).Unix()})), ErrExpired},
		{"iat in future", k.token(t, claims(map[string]any{"iat": now.Add(time.Minute).Unix()})), ErrExpired},
		{"wrong audience", k.token(t, claims(map[string]any{"aud": "someone-else"})), ErrAudience},
		{"no audience", k.token(t, claims(map[string]any{"aud": nil})), ErrAudience},
		{"wrong issuer", k.token(t, claims(map[string]any{"iss": "https://evil.example.test/"})), ErrIssuer},
		{"issuer differs by slash", k.token(t, claims(map[string]any{"iss": strings.TrimSuffix(testIssuer, "/")})), ErrIssuer},
		{"no issuer", k.token(t, claims(map[string]any{"iss": nil})), ErrIssuer},
		{"signed by another key, same kid", other.token(t, claims(nil)), ErrSignature},
		{"signed by another key, unknown kid", stranger.token(t, claims(nil)), ErrSignature},
		{"payload swapped", parts[0] + "." + strings.Split(k.token(t, claims(map[string]any{"sub": "admin"})), ".")[1] + "." + parts[2], ErrSignature},
		{"signature stripped", parts[0] + "." + parts[1] + ".", ErrSignature},
		{"alg none", compact(t, hdr("none", "k1"), claims(nil), nil), ErrSignature},
		{"alg None", compact(t, hdr("None", "k1"), claims(nil), nil), ErrSignature},
		{"alg missing", compact(t, map[string]any{"kid": "k1"}, claims(nil), func(in []byte) []byte { return k.sign(t, in) }), ErrSignature},
		{"HS256 with the public key PEM as secret", compact(t, hdr("HS256", "k1"), claims(nil), hs256(pubPEM)), ErrSignature},
		{"HS256 with the PKCS1 PEM as secret", compact(t, hdr("HS256", "k1"), claims(nil), hs256(pkcs1PEM)), ErrSignature},
		{"HS256 with the public key DER as secret", compact(t, hdr("HS256", "k1"), claims(nil), hs256(pubDER)), ErrSignature},
		{"RS256 header naming an EC key", compact(t, hdr("RS256", "ec1"), claims(nil), func(in []byte) []byte { return k.sign(t, in) }), ErrSignature},
		{"ES256 header naming an RSA key", compact(t, hdr("ES256", "k1"), claims(nil), func(in []byte) []byte { return ec.sign(t, in) }), ErrSignature},
		{"ES384 not accepted", compact(t, hdr("ES384", "ec1"), claims(nil), func(in []byte) []byte { return ec.sign(t, in) }), ErrSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &tenant.Principal{Issuer: "stale", Claims: []tenant.Claim{{Name: "a", Value: "b"}}}
			checkErr(t, v.Verify(t.Context(), tc.tok, p), tc.want, p, tc.tok)
		})
	}
	t.Run("still valid", func(t *testing.T) {
		if err := v.Verify(t.Context(), good, &tenant.Principal{}); err != nil {
			t.Fatal(err)
		}
	})
}

// HS256 listed explicitly verifies with the set's "oct" keys only: a
// public key never serves as an HMAC secret.
func TestJWTVerifyHMACExplicit(t *testing.T) {
	k := newRSAKey(t, "rsa1")
	secret := []byte("0123456789abcdef0123456789abcdef")
	oct, err := jwk.Import(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := oct.Set(jwk.KeyIDKey, "hs1"); err != nil {
		t.Fatal(err)
	}
	srv := newJWKSServer(t, k.jwk(t), oct)
	cfg := srv.config()
	cfg.Issuers[0].Algorithms = []string{"RS256", "HS256"}
	v := newVerifier(t, cfg)
	waitReady(t, v)

	hdr := func(kid string) map[string]any { return map[string]any{"alg": "HS256", "kid": kid} }
	pubDER, err := x509.MarshalPKIXPublicKey(k.raw.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	p := &tenant.Principal{}
	for name, tok := range map[string]string{
		"PEM as secret, rsa kid": compact(t, hdr("rsa1"), claims(nil), hs256(pubPEM)),
		"DER as secret, rsa kid": compact(t, hdr("rsa1"), claims(nil), hs256(pubDER)),
		"PEM as secret, no kid":  compact(t, map[string]any{"alg": "HS256"}, claims(nil), hs256(pubPEM)),
		"wrong secret, oct kid":  compact(t, hdr("hs1"), claims(nil), hs256([]byte("guess"))),
	} {
		t.Run(name, func(t *testing.T) {
			checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
		})
	}
	t.Run("oct key", func(t *testing.T) {
		if err := v.Verify(t.Context(), compact(t, hdr("hs1"), claims(nil), hs256(secret)), p); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(t.Context(), k.token(t, claims(nil)), p); err != nil {
			t.Fatal(err)
		}
	})
}

func TestJWTVerifyLeeway(t *testing.T) {
	k := newECKey(t, "k1")
	srv := newJWKSServer(t, k.jwk(t))
	cfg := srv.config()
	cfg.Issuers[0].Leeway = time.Minute
	v := newVerifier(t, cfg)
	now := time.Now()
	p := &tenant.Principal{}
	for name, c := range map[string]map[string]any{
		"expired within leeway": {"exp": now.Add(-30 * time.Second).Unix()},
		"nbf within leeway":     {"nbf": now.Add(30 * time.Second).Unix()},
	} {
		if err := v.Verify(t.Context(), k.token(t, claims(c)), p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	tok := k.token(t, claims(map[string]any{"exp": now.Add(-2 * time.Minute).Unix()}))
	checkErr(t, v.Verify(t.Context(), tok, p), ErrExpired, p, tok)
}

func TestJWTVerifyGroupsAndClaims(t *testing.T) {
	k := newRSAKey(t, "k1")
	srv := newJWKSServer(t, k.jwk(t))
	cfg := srv.config()
	v := newVerifier(t, cfg)
	cfg.Issuers[0].GroupsClaim = "roles"
	cfg.Issuers[0].Claims = []string{"sub", "tenant", "roles", "n"}
	vRoles := newVerifier(t, cfg)

	cases := []struct {
		name   string
		v      *Verifier
		extra  map[string]any
		groups []string
		claims []tenant.Claim
	}{
		{"groups string", v, map[string]any{"groups": "admins"}, []string{"admins"}, nil},
		{"groups array", v, map[string]any{"groups": []string{"a", "b"}}, []string{"a", "b"}, nil},
		{"groups empty array", v, map[string]any{"groups": []string{}}, nil, nil},
		{"no groups", v, nil, nil, nil},
		{"custom groups claim", vRoles, map[string]any{"roles": []string{"r1"}, "groups": "ignored", "tenant": "acme", "n": 3},
			[]string{"r1"},
			[]tenant.Claim{{Name: "sub", Value: "user-1"}, {Name: "tenant", Value: "acme"}, {Name: "roles", Value: "r1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &tenant.Principal{}
			if err := tc.v.Verify(t.Context(), k.token(t, claims(tc.extra)), p); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.groups, p.Groups, cmpEmpty); d != "" {
				t.Errorf("groups (-want +got):\n%s", d)
			}
			if tc.claims != nil {
				if d := cmp.Diff(tc.claims, p.Claims); d != "" {
					t.Errorf("claims (-want +got):\n%s", d)
				}
			}
			for _, c := range p.Claims {
				if tc.v == v && c.Name == "groups" {
					t.Errorf("groups claim copied into claims: %v", c)
				}
			}
		})
	}
}

// cmpEmpty treats nil and empty slices as equal.
var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestJWTVerifyKeyRotation(t *testing.T) {
	old := newRSAKey(t, "2024")
	next := newRSAKey(t, "2025")
	srv := newJWKSServer(t, old.jwk(t))
	v := newVerifier(t, srv.config()) // MinRefreshInterval: the default 30s
	waitReady(t, v)
	p := &tenant.Principal{}
	if err := v.Verify(t.Context(), old.token(t, claims(nil)), p); err != nil {
		t.Fatal(err)
	}
	base := srv.hits.Load()

	// The issuer rotates: the new key replaces the old one.
	srv.publish(t, next.jwk(t))
	if err := v.Verify(t.Context(), next.token(t, claims(nil)), p); err != nil {
		t.Fatalf("new kid after rotation: %v", err)
	}
	if got := srv.hits.Load() - base; got != 1 {
		t.Errorf("fetches for the new kid: %d, want 1", got)
	}
	// The old kid is gone from the set now cached; asking again is
	// rate-limited, so it is refused without a fetch.
	tok := old.token(t, claims(nil))
	checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
	if got := srv.hits.Load() - base; got != 1 {
		t.Errorf("fetches after the old kid: %d, want 1", got)
	}
	if err := v.Verify(t.Context(), next.token(t, claims(nil)), p); err != nil {
		t.Fatal(err)
	}
}

func TestJWTVerifyUnknownKidRateLimited(t *testing.T) {
	k := newECKey(t, "k1")
	srv := newJWKSServer(t, k.jwk(t))
	v := newVerifier(t, srv.config())
	waitReady(t, v)
	base := srv.hits.Load()

	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			forged := &testKey{kid: fmt.Sprintf("forged-%d", i), alg: k.alg, raw: k.raw}
			errs <- v.Verify(t.Context(), forged.token(t, claims(nil)), &tenant.Principal{})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrSignature) {
			t.Fatalf("unknown kid: %v, want ErrSignature", err)
		}
	}
	if got := srv.hits.Load() - base; got > 1 {
		t.Errorf("200 tokens with unknown kids caused %d fetches, want at most 1", got)
	}
	if err := v.Verify(t.Context(), k.token(t, claims(nil)), &tenant.Principal{}); err != nil {
		t.Fatal(err)
	}
}

func TestJWTVerifyUnavailableAtStart(t *testing.T) {
	k := newRSAKey(t, "k1")
	t.Run("unreachable", func(t *testing.T) {
		srv := newJWKSServer(t, k.jwk(t))
		cfg := srv.config()
		srv.Close()
		v := newVerifier(t, cfg)
		tok := k.token(t, claims(nil))
		p := &tenant.Principal{}
		checkErr(t, v.Verify(t.Context(), tok, p), ErrUnavailable, p, tok)
		if v.Ready() {
			t.Error("Ready with no key set fetched")
		}
	})
	t.Run("comes up later", func(t *testing.T) {
		srv := newJWKSServer(t, k.jwk(t))
		srv.down.Store(true)
		cfg := srv.config()
		cfg.MinRefreshInterval = time.Second
		v := newVerifier(t, cfg)
		tok := k.token(t, claims(nil))
		p := &tenant.Principal{}
		checkErr(t, v.Verify(t.Context(), tok, p), ErrUnavailable, p, tok)
		// Rate-limited: a burst right after a failed fetch does not fetch
		// per request. (One background retry may fall in it, and one
		// forced fetch if the burst outlasts MinRefreshInterval.)
		n := srv.hits.Load()
		for range 20 {
			checkErr(t, v.Verify(t.Context(), tok, p), ErrUnavailable, p, tok)
		}
		if got := srv.hits.Load() - n; got > 2 {
			t.Errorf("20 requests while down caused %d fetches", got)
		}
		srv.down.Store(false)
		eventually(t, 10*time.Second, "verify after the key set came up", func() bool {
			return v.Verify(t.Context(), tok, p) == nil
		})
		if !v.Ready() {
			t.Error("not Ready after a fetch succeeded")
		}
	})
}

func TestJWTVerifyUnavailableLater(t *testing.T) {
	k := newRSAKey(t, "k1")
	srv := newJWKSServer(t, k.jwk(t))
	cfg := srv.config()
	cfg.RefreshInterval = time.Second
	cfg.MinRefreshInterval = 50 * time.Millisecond
	v := newVerifier(t, cfg)
	waitReady(t, v)

	srv.down.Store(true)
	n := srv.hits.Load()
	// Let a background refresh fail: the cached set must survive it.
	eventually(t, 10*time.Second, "background refresh while down", func() bool { return srv.hits.Load() > n })
	p := &tenant.Principal{}
	if err := v.Verify(t.Context(), k.token(t, claims(nil)), p); err != nil {
		t.Fatalf("cached key while the JWKS is down: %v", err)
	}
	// A new kid cannot be fetched: the token is refused, not the service.
	unknown := newRSAKey(t, "k2")
	tok := unknown.token(t, claims(nil))
	checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
	if !v.Ready() {
		t.Error("not Ready with a cached set")
	}
}

func TestJWTVerifyPeriodicRefresh(t *testing.T) {
	a := newECKey(t, "a")
	b := newECKey(t, "b")
	srv := newJWKSServer(t, a.jwk(t))
	cfg := srv.config()
	cfg.RefreshInterval = time.Second
	cfg.MinRefreshInterval = time.Hour
	v := newVerifier(t, cfg)
	waitReady(t, v)
	// Spend the forced fetch: for the next hour only the background
	// refresh can bring key b in.
	unknown := &testKey{kid: "zz", alg: a.alg, raw: a.raw}
	if err := v.Verify(t.Context(), unknown.token(t, claims(nil)), &tenant.Principal{}); !errors.Is(err, ErrSignature) {
		t.Fatalf("unknown kid: %v", err)
	}
	tok := b.token(t, claims(nil))
	p := &tenant.Principal{}
	checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)

	srv.publish(t, a.jwk(t), b.jwk(t))
	n := srv.hits.Load()
	eventually(t, 10*time.Second, "background refresh", func() bool { return srv.hits.Load() > n })
	eventually(t, 10*time.Second, "key b picked up", func() bool {
		return v.Verify(t.Context(), tok, p) == nil
	})
}

func TestJWTVerifyNoKid(t *testing.T) {
	a := newRSAKey(t, "")
	b := newRSAKey(t, "")
	srv := newJWKSServer(t, a.jwk(t), b.jwk(t))
	v := newVerifier(t, srv.config())
	for _, k := range []*testKey{a, b} {
		if err := v.Verify(t.Context(), k.token(t, claims(nil)), &tenant.Principal{}); err != nil {
			t.Fatal(err)
		}
	}
	c := newRSAKey(t, "")
	tok := c.token(t, claims(nil))
	p := &tenant.Principal{}
	checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
}

func TestJWTVerifyIssuers(t *testing.T) {
	ka := newRSAKey(t, "a1")
	kb := newECKey(t, "b1")
	srvA := newJWKSServer(t, ka.jwk(t))
	srvB := newJWKSServer(t, kb.jwk(t))
	const issB = "https://other-idp.example.test"
	cfg := Config{
		Issuers: []Issuer{
			{Issuer: testIssuer, JWKSURL: srvA.URL, Audiences: []string{testAudience}},
			{Issuer: issB, JWKSURL: srvB.URL, Audiences: []string{"b-api"}, Algorithms: []string{"ES256", "RS256"}},
			// A third issuer sharing A's key set.
			{Issuer: "https://tenant-2.idp.example.test/", JWKSURL: srvA.URL, Audiences: []string{testAudience}},
		},
		HTTPClient: srvA.Client(),
	}
	v := newVerifier(t, cfg)
	waitReady(t, v)
	p := &tenant.Principal{}
	if err := v.Verify(t.Context(), kb.token(t, claims(map[string]any{"iss": issB, "aud": "b-api"})), p); err != nil || p.Issuer != issB {
		t.Fatalf("issuer B: %v, %q", err, p.Issuer)
	}
	if err := v.Verify(t.Context(), ka.token(t, claims(map[string]any{"iss": "https://tenant-2.idp.example.test/"})), p); err != nil {
		t.Fatalf("shared key set: %v", err)
	}
	for name, tc := range map[string]struct {
		tok  string
		want error
	}{
		"B's token claiming A": {kb.token(t, claims(nil)), ErrSignature},
		"A's token claiming B": {ka.token(t, claims(map[string]any{"iss": issB, "aud": "b-api"})), ErrSignature},
		"A's audience at B":    {kb.token(t, claims(map[string]any{"iss": issB})), ErrAudience},
		"B's audience at A":    {ka.token(t, claims(map[string]any{"aud": "b-api"})), ErrAudience},
		"EdDSA refused by B": {compact(t, map[string]any{"alg": "EdDSA", "kid": "b1"}, claims(map[string]any{"iss": issB, "aud": "b-api"}),
			func(in []byte) []byte { return kb.sign(t, in) }), ErrSignature},
		"issuer neither A nor B": {ka.token(t, claims(map[string]any{"iss": "https://c.example.test"})), ErrIssuer},
	} {
		t.Run(name, func(t *testing.T) {
			checkErr(t, v.Verify(t.Context(), tc.tok, p), tc.want, p, tc.tok)
		})
	}
}

func TestJWTVerifyAfterClose(t *testing.T) {
	k := newRSAKey(t, "k1")
	srv := newJWKSServer(t, k.jwk(t))
	v, err := New(t.Context(), srv.config())
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, v)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	p := &tenant.Principal{}
	if err := v.Verify(t.Context(), k.token(t, claims(nil)), p); err != nil {
		t.Fatalf("cached key after Close: %v", err)
	}
	n := srv.hits.Load()
	tok := newRSAKey(t, "k2").token(t, claims(nil))
	checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
	if srv.hits.Load() != n {
		t.Error("fetched after Close")
	}
}

func TestJWTConfigValidate(t *testing.T) {
	ok := Issuer{Issuer: testIssuer, JWKSURL: "https://idp.example.test/jwks", Audiences: []string{"a"}}
	with := func(f func(*Issuer)) Config {
		is := ok
		f(&is)
		return Config{Issuers: []Issuer{is}}
	}
	if err := (&Config{Issuers: []Issuer{ok}}).Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if err := with(func(is *Issuer) { is.JWKSURL = "http://keycloak:8080/certs"; is.AllowHTTP = true }); err.Validate() != nil {
		t.Fatalf("http with AllowHTTP: %v", err.Validate())
	}
	cases := map[string]Config{
		"no issuers":       {},
		"empty issuer":     with(func(is *Issuer) { is.Issuer = "" }),
		"duplicate issuer": {Issuers: []Issuer{ok, ok}},
		"no jwks url":      with(func(is *Issuer) { is.JWKSURL = "" }),
		"http jwks url":    with(func(is *Issuer) { is.JWKSURL = "http://idp.example.test/jwks" }),
		"relative url":     with(func(is *Issuer) { is.JWKSURL = "/jwks" }),
		"no audiences":     with(func(is *Issuer) { is.Audiences = nil }),
		"empty audience":   with(func(is *Issuer) { is.Audiences = []string{""} }),
		"alg none":         with(func(is *Issuer) { is.Algorithms = []string{"none"} }),
		"alg unknown":      with(func(is *Issuer) { is.Algorithms = []string{"RS1"} }),
		"alg lower case":   with(func(is *Issuer) { is.Algorithms = []string{"rs256"} }),
		"negative leeway":  with(func(is *Issuer) { is.Leeway = -time.Second }),
		"empty claim name": with(func(is *Issuer) { is.Claims = []string{""} }),
		"negative refresh": {Issuers: []Issuer{ok}, RefreshInterval: -1},
		"negative max":     {Issuers: []Issuer{ok}, MaxTokenBytes: -1},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if err := cfg.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
			if _, err := New(t.Context(), cfg); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	// Every problem is reported, not just the first.
	err := (&Config{Issuers: []Issuer{{Issuer: "x"}}, FetchTimeout: -1}).Validate()
	if n := strings.Count(err.Error(), "\n") + 1; n < 3 {
		t.Errorf("Validate reported %d problems: %v", n, err)
	}
}

func TestJWTDefaultsNotShared(t *testing.T) {
	cfg := Config{Issuers: []Issuer{{Issuer: testIssuer, JWKSURL: "https://x.test/jwks", Audiences: []string{"a"}}}}
	d := cfg.withDefaults()
	d.Issuers[0].Algorithms[0] = "HS256"
	if defaultAlgorithms[0] != "RS256" {
		t.Fatal("withDefaults aliases defaultAlgorithms")
	}
}

// Keys the verifier cannot or must not use are left out of the set
// without hiding the good ones, and a broken response keeps the last set.
func enc64(b []byte) string { return enc.EncodeToString(b) }

func TestJWTVerifyKeySetOddities(t *testing.T) {
	good := newRSAKey(t, "good")
	enc := newRSAKey(t, "enc")
	small := &testKey{kid: "small", alg: "RS256"}
	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	small.raw = rk
	encJWK := enc.jwk(t)
	if err := encJWK.Set(jwk.KeyUsageKey, "enc"); err != nil {
		t.Fatal(err)
	}
	wrongAlg := newRSAKey(t, "ps")
	wrongAlgJWK := wrongAlg.jwk(t)
	if err := wrongAlgJWK.Set(jwk.AlgorithmKey, jwa.PS256()); err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	for _, k := range []jwk.Key{encJWK, wrongAlgJWK, good.jwk(t)} {
		if err := set.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	body := mustJSON(t, set)
	// An unknown key type and an RSA key too small for jwx to import,
	// spliced in by hand.
	smallJWK := fmt.Sprintf(`{"kty":"RSA","kid":"small","e":"AQAB","n":%q}`, enc64(rk.N.Bytes()))
	body = []byte(strings.Replace(string(body), `{"keys":[`, `{"keys":[{"kty":"XYZ","kid":"odd"},`+smallJWK+",", 1))

	srv := newJWKSServer(t)
	srv.publishRaw(body)
	cfg := srv.config()
	cfg.MinRefreshInterval = time.Millisecond
	v := newVerifier(t, cfg)
	waitReady(t, v)
	p := &tenant.Principal{}
	if err := v.Verify(t.Context(), good.token(t, claims(nil)), p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*testKey{enc, small, wrongAlg} {
		tok := k.token(t, claims(nil))
		checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
	}

	// The JWKS URL starts answering garbage: fetches fail, the set stays.
	srv.publishRaw([]byte("<html>maintenance</html>"))
	n := srv.hits.Load()
	tok := newRSAKey(t, "new").token(t, claims(nil))
	checkErr(t, v.Verify(t.Context(), tok, p), ErrSignature, p, tok)
	if srv.hits.Load() == n {
		t.Fatal("unknown kid did not fetch")
	}
	if err := v.Verify(t.Context(), good.token(t, claims(nil)), p); err != nil {
		t.Fatalf("after a broken response: %v", err)
	}
}
