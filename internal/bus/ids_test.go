package bus

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"testing"
)

// TestRandomToken: tokens are the standard base32 of their bytes in
// lowercase, unpadded, of the expected length.
func TestRandomToken(t *testing.T) {
	std := base32.StdEncoding.WithPadding(base32.NoPadding)
	for n := range 20 {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		if got, want := b32.EncodeToString(b), strings.ToLower(std.EncodeToString(b)); got != want {
			t.Fatalf("%x: %q, want %q", b, got, want)
		}
		tok := RandomToken(n)
		if len(tok) != (n*8+4)/5 || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyz234567") != "" {
			t.Fatalf("RandomToken(%d) = %q", n, tok)
		}
	}
}
