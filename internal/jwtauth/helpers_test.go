package jwtauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

const (
	testIssuer   = "https://idp.example.test/"
	testAudience = "switchyard"
)

// testKey is a signing key of a test issuer. Tokens are signed with the
// standard library, not jwx, so that the tests check jwx rather than trust
// it twice.
type testKey struct {
	kid string
	alg string
	raw crypto.Signer
}

func newRSAKey(t testing.TB, kid string) *testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: "RS256", raw: k}
}

func newECKey(t testing.TB, kid string) *testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: "ES256", raw: k}
}

func newEdKey(t testing.TB, kid string) *testKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: "EdDSA", raw: k}
}

// jwk returns the public JWK of k as an issuer publishes it.
func (k *testKey) jwk(t testing.TB) jwk.Key {
	t.Helper()
	key, err := jwk.Import(k.raw.Public())
	if err != nil {
		t.Fatal(err)
	}
	if k.kid != "" {
		if err := key.Set(jwk.KeyIDKey, k.kid); err != nil {
			t.Fatal(err)
		}
	}
	if err := key.Set(jwk.KeyUsageKey, "sig"); err != nil {
		t.Fatal(err)
	}
	return key
}

func (k *testKey) sign(t testing.TB, in []byte) []byte {
	t.Helper()
	h := sha256.Sum256(in)
	switch p := k.raw.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, p, crypto.SHA256, h[:])
		if err != nil {
			t.Fatal(err)
		}
		return s
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, p, h[:])
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	case ed25519.PrivateKey:
		return ed25519.Sign(p, in)
	}
	t.Fatalf("unsupported key %T", k.raw)
	return nil
}

var enc = base64.RawURLEncoding

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compact builds a compact JWS from a header and claims, signed by sign
// (nil for an empty signature).
func compact(t testing.TB, hdr, claims map[string]any, sign func([]byte) []byte) string {
	t.Helper()
	in := enc.EncodeToString(mustJSON(t, hdr)) + "." + enc.EncodeToString(mustJSON(t, claims))
	var sig []byte
	if sign != nil {
		sig = sign([]byte(in))
	}
	return in + "." + enc.EncodeToString(sig)
}

// claims returns valid claims for the test issuer; extra entries are
// added, and entries set to nil removed.
func claims(extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": "user-1",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// token signs c with k, its kid and its alg in the header.
func (k *testKey) token(t testing.TB, c map[string]any) string {
	t.Helper()
	hdr := map[string]any{"alg": k.alg, "typ": "JWT"}
	if k.kid != "" {
		hdr["kid"] = k.kid
	}
	return compact(t, hdr, c, func(in []byte) []byte { return k.sign(t, in) })
}

func hs256(secret []byte) func([]byte) []byte {
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		return m.Sum(nil)
	}
}

// jwksServer serves a key set over TLS; it counts requests and can be
// switched down (503).
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64
	down atomic.Bool
	mu   sync.Mutex
	body []byte
}

func newJWKSServer(t testing.TB, keys ...jwk.Key) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.publish(t, keys...)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		b := s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// publish replaces the served key set.
func (s *jwksServer) publish(t testing.TB, keys ...jwk.Key) {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		if err := set.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	s.publishRaw(mustJSON(t, set))
}

// publishRaw replaces the served body.
func (s *jwksServer) publishRaw(b []byte) {
	s.mu.Lock()
	s.body = b
	s.mu.Unlock()
}

// config returns a one-issuer config for s.
func (s *jwksServer) config() Config {
	return Config{
		Issuers: []Issuer{{
			Issuer:    testIssuer,
			JWKSURL:   s.URL + "/jwks.json",
			Audiences: []string{testAudience},
		}},
		HTTPClient: s.Client(),
	}
}

func newVerifier(t testing.TB, cfg Config) *Verifier {
	t.Helper()
	v, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Error(err)
		}
	})
	return v
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, timeout)
		}
		<-tick.C
	}
}

func waitReady(t testing.TB, v *Verifier) {
	t.Helper()
	eventually(t, 10*time.Second, "verifier ready", v.Ready)
}

// noTokenIn fails if msg quotes tok or any sizeable part of it.
func noTokenIn(t testing.TB, msg, tok string) {
	t.Helper()
	for _, part := range append(strings.Split(tok, "."), tok) {
		if len(part) >= 8 && strings.Contains(msg, part) {
			t.Errorf("error %q quotes the token", msg)
		}
	}
}
