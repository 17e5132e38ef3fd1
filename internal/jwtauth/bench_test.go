package jwtauth

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// BenchmarkJWTVerify measures Verify with the key set cached: header and
// claims decoding, key lookup, signature check, validation and filling the
// Principal.
func BenchmarkJWTVerify(b *testing.B) {
	for _, newKey := range []func(testing.TB, string) *testKey{newRSAKey, newECKey, newEdKey} {
		k := newKey(b, "k1")
		b.Run("alg="+k.alg, func(b *testing.B) {
			srv := newJWKSServer(b, k.jwk(b))
			v := newVerifier(b, srv.config())
			waitReady(b, v)
			tok := k.token(b, claims(map[string]any{"groups": []string{"g1", "g2"}, "email": "u@example.test"}))
			p := &tenant.Principal{}
			if err := v.Verify(b.Context(), tok, p); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Verify(b.Context(), tok, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
