package grant

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func testKey(t testing.TB, b byte) *Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestGrantVerify(t *testing.T) {
	k := testKey(t, 1)
	now := time.Now()
	tok := k.Sign(nil, "acme", "github", "search", now.Add(time.Second))
	if len(tok) != TokenLen {
		t.Fatalf("token of %d bytes, want %d", len(tok), TokenLen)
	}
	if err := k.Verify(tok, "acme", "github", "search", now); err != nil {
		t.Fatalf("Verify of a fresh token: %v", err)
	}
	flipped := append([]byte(nil), tok...)
	flipped[len(flipped)-1] ^= 1
	later := append([]byte(nil), tok...)
	later[7]++ // a later expiry the router never signed
	for _, c := range []struct {
		name                   string
		tok                    []byte
		key                    *Key
		tenant, upstream, tool string
		at                     time.Time
		want                   error
	}{
		{"other tenant", tok, k, "evil", "github", "search", now, ErrMismatch},
		{"other upstream", tok, k, "acme", "gitlab", "search", now, ErrMismatch},
		{"other tool", tok, k, "acme", "github", "delete_repo", now, ErrMismatch},
		{"shifted boundary", tok, k, "acmeg", "ithub", "search", now, ErrMismatch},
		{"forged mac", flipped, k, "acme", "github", "search", now, ErrMismatch},
		{"extended expiry", later, k, "acme", "github", "search", now, ErrMismatch},
		{"other key", tok, testKey(t, 2), "acme", "github", "search", now, ErrMismatch},
		{"expired", tok, k, "acme", "github", "search", now.Add(2 * time.Second), ErrExpired},
		{"empty", nil, k, "acme", "github", "search", now, ErrMalformed},
		{"truncated", tok[:TokenLen-1], k, "acme", "github", "search", now, ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.key.Verify(c.tok, c.tenant, c.upstream, c.tool, c.at); !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestGrantShortKey(t *testing.T) {
	if _, err := NewKey(make([]byte, 15)); err == nil {
		t.Fatal("NewKey accepted a 15-byte key")
	}
}

// BenchmarkGrantVerify is the worker's cost per granted call.
func BenchmarkGrantVerify(b *testing.B) {
	k := testKey(b, 1)
	now := time.Now()
	tok := k.Sign(nil, "acme", "everything-http", "test_simple_text", now.Add(time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		if err := k.Verify(tok, "acme", "everything-http", "test_simple_text", now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGrantSign is the router's cost per grant it makes.
func BenchmarkGrantSign(b *testing.B) {
	k := testKey(b, 1)
	exp := time.Now().Add(time.Minute)
	buf := make([]byte, 0, TokenLen)
	b.ReportAllocs()
	for b.Loop() {
		buf = k.Sign(buf[:0], "acme", "everything-http", "test_simple_text", exp)
	}
}
