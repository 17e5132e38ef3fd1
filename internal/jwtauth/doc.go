// Package jwtauth verifies JWT bearer tokens against the JSON Web Key Sets
// (JWKS) of configured issuers and turns a verified token into a
// [tenant.Principal].
//
// # Verification
//
// [Verifier.Verify] reads the token's unverified header (alg, kid) and its
// unverified iss only to choose the issuer and the key; nothing read before
// the signature check is trusted. It then requires, in order:
//
//   - an iss that names a configured [Issuer] ([ErrIssuer]);
//   - an alg from that issuer's allow-list ([ErrSignature]); "none" is never
//     accepted and HMAC (HS*) only when listed explicitly;
//   - a key of the issuer's key set whose kid, key type, curve, "use",
//     "key_ops" and "alg" fit the token ([ErrSignature]), so a public key can
//     never serve as an HMAC secret;
//   - a valid signature, checked by github.com/lestrrat-go/jwx/v3
//     ([ErrSignature]);
//   - exp present and not passed, nbf and iat not in the future, each with
//     the issuer's leeway ([ErrExpired]);
//   - an aud that names one of the issuer's audiences ([ErrAudience]).
//
// Error messages never contain the token or any part of it.
//
// # Key sets
//
// Key sets are fetched and cached by jwx's [jwk.Cache] (built on httprc):
// once when [New] registers them, then every [Config.RefreshInterval]. A
// token whose kid is not in the cached set forces a fetch, so a rotated key
// is accepted as soon as the issuer publishes it; such forced fetches happen
// at most once per [Config.MinRefreshInterval] per key set, and concurrent
// callers share one, so tokens with made-up kids cannot turn into a fetch
// per request. A failed fetch keeps the last good set; only an issuer whose
// set has never been fetched answers [ErrUnavailable].
//
// The package touches no NATS subject or KV bucket; its only I/O is the
// HTTPS fetch of the configured JWKS URLs.
package jwtauth
