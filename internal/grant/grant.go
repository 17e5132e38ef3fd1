// Package grant signs and verifies route grant tokens: a router's MAC over
// what a route grant ([proto.RouteGrant]) lets an edge call, so that a
// worker runs a call an edge sends it on a grant (subject
// switchyard.v1.grant.<worker>.tools_call) only if a router, which applied
// the tenant's policy, allowed that tool for that tenant, and only until
// the grant expires. An edge's NATS identity therefore reaches no tool
// that no tenant's policy allows (docs/security.md).
//
// The key is the fleet's shared secret proto.KeyGrants in KV bucket
// proto.BucketKeys, which routers and workers may read and edges may not.
package grant

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"hash"
	"sync"
	"time"
)

// TokenLen is the length of a token: the expiry (Unix milliseconds, 8
// bytes big-endian) and the first 16 bytes of the HMAC-SHA256.
const TokenLen = 8 + macLen

const macLen = 16

// domain separates grant MACs from any other use of the key.
const domain = "switchyard grant v1\x00"

// Errors of [Key.Verify].
var (
	ErrMalformed = errors.New("grant: malformed token")
	ErrExpired   = errors.New("grant: token expired")
	ErrMismatch  = errors.New("grant: token does not grant this call")
)

// Key signs and verifies tokens. Safe for concurrent use.
type Key struct {
	pool sync.Pool // of *state: HMAC-SHA256 with the key
}

// NewKey returns a Key for secret (at least 16 bytes), which it copies.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) < 16 {
		return nil, errors.New("grant: key shorter than 16 bytes")
	}
	s := append([]byte(nil), secret...)
	k := &Key{}
	k.pool.New = func() any { return &state{h: hmac.New(sha256.New, s)} }
	return k, nil
}

// Sign returns the token granting calls of the upstream's tool name
// (its own name of it) for tenant until exp, appended to dst.
func (k *Key) Sign(dst []byte, tenant, upstream, name string, exp time.Time) []byte {
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(exp.UnixMilli()))
	dst = append(dst, e[:]...)
	return k.mac(dst, e[:], tenant, upstream, name)
}

// Verify checks that tok grants a call of upstream's tool name for tenant
// at now. It returns [ErrMalformed], [ErrExpired] or [ErrMismatch].
func (k *Key) Verify(tok []byte, tenant, upstream, name string, now time.Time) error {
	if len(tok) != TokenLen {
		return ErrMalformed
	}
	var buf [macLen]byte
	want := k.mac(buf[:0], tok[:8], tenant, upstream, name)
	if subtle.ConstantTimeCompare(want, tok[8:]) != 1 {
		return ErrMismatch
	}
	if now.UnixMilli() > int64(binary.BigEndian.Uint64(tok[:8])) {
		return ErrExpired
	}
	return nil
}

// mac appends the truncated MAC of (exp, tenant, upstream, name) to dst.
// Each string is length-prefixed, so no two tuples sign alike.
func (k *Key) mac(dst, exp []byte, tenant, upstream, name string) []byte {
	st := k.pool.Get().(*state)
	msg := append(st.buf[:0], domain...)
	msg = append(msg, exp...)
	for _, s := range [...]string{tenant, upstream, name} {
		msg = binary.BigEndian.AppendUint32(msg, uint32(len(s)))
		msg = append(msg, s...)
	}
	st.h.Reset()
	_, _ = st.h.Write(msg)
	out := st.h.Sum(st.sum[:0])
	dst = append(dst, out[:macLen]...)
	k.pool.Put(st)
	return dst
}

// state is one pooled MAC computation: the keyed hash and its buffers.
type state struct {
	h   hash.Hash
	buf [256]byte
	sum [sha256.Size]byte
}
