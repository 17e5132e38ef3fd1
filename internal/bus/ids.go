package bus

import (
	"crypto/rand"
	"encoding/base32"
)

// b32 is base32 (RFC 4648) in lowercase, unpadded: the letters are those
// of the standard alphabet, lowered once here rather than per token.
var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// RandomToken returns n random bytes as lowercase base32: safe in subjects,
// session ids and slugs.
func RandomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead)
	return b32.EncodeToString(b)
}

// NewID returns prefix + "-" + a short random token: a default role id.
func NewID(prefix string) string { return prefix + "-" + RandomToken(5) }
