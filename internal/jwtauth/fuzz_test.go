package jwtauth

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/tenant"
)

// FuzzJWTVerify feeds arbitrary strings to Verify. Properties: it never
// panics, every error is one of the package's fixed errors (so it cannot
// quote the input) wrapping exactly one sentinel, and the Principal is
// empty on error. Only the valid seed may
// pass, and then only unchanged.
func FuzzJWTVerify(f *testing.F) {
	k := newRSAKey(f, "k1")
	srv := newJWKSServer(f, k.jwk(f))
	v := newVerifier(f, srv.config())
	waitReady(f, v)
	good := k.token(f, claims(map[string]any{"groups": []string{"g"}}))
	for _, s := range []string{
		good,
		"",
		"a.b.c",
		"...",
		good + ".",
		strings.Replace(good, ".", "..", 1),
		compact(f, map[string]any{"alg": "none"}, claims(nil), nil),
		compact(f, map[string]any{"alg": "HS256", "kid": "k1"}, claims(nil), hs256([]byte("x"))),
		compact(f, map[string]any{"alg": "RS256", "kid": "zz"}, claims(nil), func(in []byte) []byte { return k.sign(f, in) }),
		compact(f, map[string]any{"alg": "RS256", "kid": "k1"}, map[string]any{"iss": testIssuer}, func(in []byte) []byte { return k.sign(f, in) }),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p := &tenant.Principal{}
		err := v.Verify(t.Context(), tok, p)
		if err == nil {
			if tok != good {
				t.Fatalf("accepted a token other than the valid seed")
			}
			return
		}
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("error %q wraps %d sentinels", err, n)
		}
		if p.Issuer != "" || len(p.Claims) != 0 || len(p.Groups) != 0 {
			t.Fatalf("principal not empty after error")
		}
		if !slices.Contains(fixedErrors, err) {
			t.Fatalf("error %q is not one of the fixed errors", err)
		}
	})
}

// fixedErrors are the errors Verify returns as they are, without any
// detail of the request (only ErrUnavailable carries one: the URL).
var fixedErrors = []error{
	errEmpty, errTooLong, errParts, errBase64, errJSON, errClaims, errNoExp,
	errGroups, errExpired, errNotYet, errAudience, errNoIss, errUnknownIss,
	errAlg, errUnknownKid, errNoFit, errBadSig,
}
