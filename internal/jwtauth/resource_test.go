package jwtauth

import (
	"errors"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// TestVerifyForResource: an aud equal to the endpoint's resource URL is
// accepted only under a configured audience, whatever resource the caller
// names (the edge derives it from the request's Host).
func TestVerifyForResource(t *testing.T) {
	k := newRSAKey(t, "k1")
	srv := newJWKSServer(t, k.jwk(t))
	v := newVerifier(t, srv.config())
	for _, tc := range []struct {
		name, aud, resource string
		ok                  bool
	}{
		{"configured audience", testAudience, "", true},
		{"endpoint under it", testAudience + "/up", testAudience + "/up", true},
		{"endpoint, no resource given", testAudience + "/up", "", false},
		{"another endpoint's token", testAudience + "/up", testAudience + "/other", false},
		{"prefix without a slash", testAudience + "x", testAudience + "x", false},
		{"foreign host", "https://evil.example/mcp/up", "https://evil.example/mcp/up", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p tenant.Principal
			_, err := v.VerifyFor(t.Context(), k.token(t, claims(map[string]any{"aud": tc.aud})), tc.resource, &p)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrAudience)) {
				t.Fatalf("VerifyFor: %v, want ok=%v (or ErrAudience)", err, tc.ok)
			}
		})
	}
}
