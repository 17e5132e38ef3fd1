// Package apikey mints, parses and verifies Switchyard API keys. It is a
// pure codec: tenancy-svc stores each [Record] (in the principals / API
// keys KV bucket, keyed by [Record.ID]) and the edge verifies a presented
// key against the record it looked up by the key's id. The package does
// no I/O and keeps no state; every function is safe for concurrent use.
//
// # Format
//
// A key is exactly [KeyLen] (80) ASCII bytes:
//
//	syk_<id>_<secret><check>
//
//	offset  len  part
//	0       4    "syk_"   the kind: a Switchyard API key, format 1
//	4       16   id       10 random bytes (80 bits), base32
//	20      1    "_"
//	21      52   secret   32 random bytes (256 bits), base32
//	73      7    check    CRC-32 (IEEE) of bytes 0..72, big-endian, base32
//
// base32 is RFC 4648 with the lowercase alphabet "abcdefghijklmnopqrstuvwxyz234567"
// and no padding; unused trailing bits must be zero, so every (id, secret)
// has exactly one spelling. Uppercase, whitespace, padding and any other
// byte are rejected, as is any other length. The key is one "word" of
// [a-z2-7_] (a double click selects all of it) and the fixed prefix lets
// secret scanners find leaked keys.
//
// The id is not a secret: it names the record, may be logged and is safe
// as a KV key or NATS subject token. Possessing an id grants nothing. The
// check rejects typos and truncated pastes in [Parse] without a lookup; it
// is not a MAC and adds no security.
//
// A later format gets a new prefix (such as "syk2_"); a key with an
// unknown prefix is [ErrMalformed].
//
// # Hashing
//
// A record stores SHA-256("syk_" || id || secret), where id is the 16
// ASCII characters and secret the 32 decoded bytes: 52 bytes, one SHA-256
// block. Binding the id means a hash copied under another id never
// verifies. Verification compares the full 32-byte digest with
// crypto/subtle.
//
// A slow KDF (bcrypt, scrypt, argon2) is not used, deliberately. Those
// exist to make guessing low-entropy, human-chosen passwords expensive
// once a hash leaks. Here the secret is 256 uniformly random bits: there
// is no dictionary to try, and finding a preimage of SHA-256 costs 2^256
// work however fast one hash is. A KDF would add nothing to that, but
// would cost milliseconds of CPU per request at the edge, turning every
// unauthenticated request into a denial-of-service lever, and miss the
// 2 µs verification budget. A server-side pepper (HMAC key) is omitted
// for the same reason: it only helps when the secret is guessable, and
// would add a secret every verifier must share and rotate.
//
// # Errors
//
// [Verify] returns exactly one of the sentinels [ErrMalformed],
// [ErrUnknown] (nil record: the caller's lookup found none; callers
// return it from their own lookups too), [ErrMismatch], [ErrRevoked] and
// [ErrExpired], unwrapped, never carrying any part of the key. The
// secret is checked before revocation and expiry, so those two are only
// reported to a caller who holds the key.
//
// # Redaction
//
// [Secret] prints, logs (slog) and marshals as "[redacted]" whatever the
// verb; [Record] prints and logs without its hash. Keys themselves are
// plain strings: never log them; log [Record.ID] or the id from [Parse].
package apikey
