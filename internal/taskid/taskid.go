// Package taskid mints and opens the task ids clients see for the tasks of
// upstream servers (the MCP tasks extension, io.modelcontextprotocol/tasks,
// SEP-2663).
//
// An upstream's own task ids live in the upstream's namespace, which every
// client of the gateway shares (a worker talks to it under one identity),
// so a client must never see or guess one. The gateway hands out instead
//
//	sy1.<base64url(upstream)>.<base64url(nonce | AES-256-GCM(upstream task id))>
//
// sealed under a key every worker shares, with the upstream and the
// [Scope] that created the task as additional data: the caller (tenant,
// JWT issuer, principal) and where it called from (its client session for
// 2025-era sessions, its endpoint for 2026-07-28 stateless requests). The
// upstream's id is unreadable, and opening an id under any other scope,
// upstream or key fails exactly as opening a forged one does, so a task is
// reachable only by the caller that created it, from where it created it,
// and nobody else learns that it exists. Ids carry no state: any worker
// opens any id, with no store to write before the CreateTaskResult goes
// out. Routers read the upstream (a name clients see anyway) without the
// key ([Upstream]) to choose a worker; workers open ([Codec.Open]).
//
// # Ids minted before the principal was sealed in
//
// Earlier workers sealed ids to the client session or to the tenant and
// endpoint alone, with the same format. [Codec.Open] still opens such an
// id of a client session, from that session: the edge binds each session
// to the caller that created it, so only that caller can present it. An
// old id of a stateless (2026-07-28) request does not open: it named only
// the tenant and endpoint, so nothing tells whose it is. Task ids are
// short-lived; the client gets -32602 for such an id, as for any unknown
// one.
package taskid

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// prefix starts every gateway task id; the "1" versions the format.
const prefix = "sy1."

// KeyLen is the length of a Codec key in bytes (AES-256).
const KeyLen = 32

var b64 = base64.RawURLEncoding

// Codec mints and opens gateway task ids under one key, and opens those
// of the key before it ([Codec.Rekey]). It is safe for concurrent use.
type Codec struct {
	keys atomic.Pointer[keyPair]
}

// keyPair is the current key and the one before it (nil: none).
type keyPair struct {
	cur, prev cipher.AEAD
}

// New returns a Codec for key ([KeyLen] bytes).
func New(key []byte) (*Codec, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	c := &Codec{}
	c.keys.Store(&keyPair{cur: aead})
	return c, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("taskid: key of %d bytes, want %d", len(key), KeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Rekey mints under key from now on; ids of the key before still open (the
// fleet's key changes when tenancy-svc makes it again after the store was
// lost, and every worker follows: bus.FollowSecret).
func (c *Codec) Rekey(key []byte) error {
	aead, err := newAEAD(key)
	if err != nil {
		return err
	}
	old := c.keys.Load()
	c.keys.Store(&keyPair{cur: aead, prev: old.cur})
	return nil
}

// Mint returns a gateway id of upstream's task id, bound to scope. Each
// call seals with a fresh random nonce, so two mints of one id differ.
func (c *Codec) Mint(scope Scope, upstream, id string) string {
	return c.seal(scope.key(), upstream, id)
}

// seal mints under the additional data of scope key.
func (c *Codec) seal(key, upstream, id string) string {
	aead := c.keys.Load().cur
	ns := aead.NonceSize()
	sealed := make([]byte, ns, ns+len(id)+aead.Overhead())
	_, _ = rand.Read(sealed)
	sealed = aead.Seal(sealed, sealed[:ns], []byte(id), aad(key, upstream))
	var b strings.Builder
	b.Grow(len(prefix) + b64.EncodedLen(len(upstream)) + 1 + b64.EncodedLen(len(sealed)))
	b.WriteString(prefix)
	b.WriteString(b64.EncodeToString([]byte(upstream)))
	b.WriteByte('.')
	b.WriteString(b64.EncodeToString(sealed))
	return b.String()
}

// Open returns the upstream and the upstream's task id of gid; ok is false
// when gid is not a gateway id, or was minted under another scope or key.
// An id of a client session minted before scopes named the caller opens
// from that session (see the package doc).
func (c *Codec) Open(scope Scope, gid string) (upstream, id string, ok bool) {
	upstream, sealed, ok := split(gid)
	if !ok {
		return "", "", false
	}
	keys := c.keys.Load()
	for _, aead := range [...]cipher.AEAD{keys.cur, keys.prev} {
		if aead == nil || len(sealed) < aead.NonceSize()+aead.Overhead() {
			continue
		}
		ns := aead.NonceSize()
		plain, err := aead.Open(nil, sealed[:ns], sealed[ns:], aad(scope.key(), upstream))
		if err != nil && scope.Session != "" {
			plain, err = aead.Open(nil, sealed[:ns], sealed[ns:], aad(scope.sessionKeyV1(), upstream))
		}
		if err == nil {
			return upstream, string(plain), true
		}
	}
	return "", "", false
}

// Upstream returns the upstream named in gid, unverified: enough to route a
// request to a worker of it, which then opens gid.
func Upstream(gid string) (string, bool) {
	u, _, ok := split(gid)
	return u, ok
}

func split(gid string) (upstream string, sealed []byte, ok bool) {
	rest, found := strings.CutPrefix(gid, prefix)
	if !found {
		return "", nil, false
	}
	u, s, found := strings.Cut(rest, ".")
	if !found || strings.IndexByte(s, '.') >= 0 {
		return "", nil, false
	}
	ub, err1 := b64.DecodeString(u)
	sb, err2 := b64.DecodeString(s)
	if err1 != nil || err2 != nil || len(ub) == 0 {
		return "", nil, false
	}
	return string(ub), sb, true
}

// aad is the additional data an id is sealed with: the scope and the
// upstream, each length-prefixed so that no two pairs share an encoding.
func aad(scope, upstream string) []byte {
	b := make([]byte, 0, 8+len(scope)+len(upstream))
	return appendField(appendField(b, scope), upstream)
}

// Scope is who created a task, and from where: the fields of the
// request (proto.Request) that carried it. An id opens only under the
// scope it was minted in (every field equal), except View for a client
// session, which a session never leaves.
type Scope struct {
	// Tenant is the caller's tenant.
	Tenant string
	// Issuer is the JWT issuer of Principal; "" for an API key's
	// principal or an anonymous caller.
	Issuer string
	// Principal is the caller within Tenant: an API key's principal, a
	// JWT's sub, or "" for an anonymous caller (all anonymous callers of
	// a tenant are one caller).
	Principal string
	// Edge and Session name a 2025-era client session; Session is "" for
	// a stateless (2026-07-28) request.
	Edge, Session string
	// View is the endpoint of a stateless request: "" for the federated
	// view, else the passthrough upstream.
	View string
}

// key is the scope as additional data: every field length-prefixed, so
// that no two scopes share an encoding, after a tag that no scope of the
// earlier format ("s\x00..." or "t\x00...") starts with.
func (s Scope) key() string {
	fields := [...]string{s.Tenant, s.Issuer, s.Principal, s.Edge, s.Session, ""}
	tag := byte('S')
	if s.Session == "" {
		// A stateless request is its endpoint's; a session's calls all
		// come through its one view.
		tag, fields[3], fields[5] = 'T', "", s.View
	}
	n := 2
	for _, f := range fields {
		n += 4 + len(f)
	}
	b := make([]byte, 0, n)
	b = append(b, '2', tag)
	for _, f := range fields {
		b = appendField(b, f)
	}
	return string(b)
}

// sessionKeyV1 is the scope a client session's ids were sealed with before
// scopes named the caller.
func (s Scope) sessionKeyV1() string {
	return "s\x00" + s.Edge + "\x00" + s.Session
}

func appendField(b []byte, f string) []byte {
	l := len(f)
	b = append(b, byte(l>>24), byte(l>>16), byte(l>>8), byte(l))
	return append(b, f...)
}

// Bucket is the KV bucket of the fleet's shared keys; KeyTasks is the key
// of the task id key in it.
const (
	Bucket   = proto.BucketKeys
	KeyTasks = proto.KeyTasks
)

// Shared returns the Codec of the fleet: the key stored in KV bucket
// [Bucket] under [KeyTasks], waiting until tenancy-svc has created it (it
// provisions the fleet's secrets; no other role may write the bucket).
// Every worker of a deployment gets the same key, so an id one minted
// opens on any other. It fails when ctx ends first, or for a stored key
// that is not [KeyLen] bytes.
func Shared(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Codec, error) {
	key, err := bus.Secret(ctx, js, KeyTasks, log)
	if err != nil {
		return nil, fmt.Errorf("taskid: %w", err)
	}
	return New(key)
}
