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
// sealed under a key every worker shares, with the upstream and the scope
// that created the task as additional data: the client session (2025-era
// sessions) or the tenant and endpoint (2026-07-28 stateless requests).
// The upstream's id is unreadable, and opening an id under any other
// scope, upstream or key fails, so a task is reachable only from where it
// was created. Ids carry no state: any worker opens any id, with no store
// to write before the CreateTaskResult goes out. Routers read the upstream
// (a name clients see anyway) without the key ([Upstream]) to choose a
// worker; workers open ([Codec.Open]).
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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// prefix starts every gateway task id; the "1" versions the format.
const prefix = "sy1."

// KeyLen is the length of a Codec key in bytes (AES-256).
const KeyLen = 32

var b64 = base64.RawURLEncoding

// Codec mints and opens gateway task ids under one key. It is immutable and
// safe for concurrent use.
type Codec struct {
	aead cipher.AEAD
}

// New returns a Codec for key ([KeyLen] bytes).
func New(key []byte) (*Codec, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("taskid: key of %d bytes, want %d", len(key), KeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Codec{aead: aead}, nil
}

// Mint returns a gateway id of upstream's task id, bound to scope. Each
// call seals with a fresh random nonce, so two mints of one id differ.
func (c *Codec) Mint(scope, upstream, id string) string {
	ns := c.aead.NonceSize()
	sealed := make([]byte, ns, ns+len(id)+c.aead.Overhead())
	_, _ = rand.Read(sealed)
	sealed = c.aead.Seal(sealed, sealed[:ns], []byte(id), aad(scope, upstream))
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
func (c *Codec) Open(scope, gid string) (upstream, id string, ok bool) {
	upstream, sealed, ok := split(gid)
	if !ok || len(sealed) < c.aead.NonceSize()+c.aead.Overhead() {
		return "", "", false
	}
	ns := c.aead.NonceSize()
	plain, err := c.aead.Open(nil, sealed[:ns], sealed[ns:], aad(scope, upstream))
	if err != nil {
		return "", "", false
	}
	return upstream, string(plain), true
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
	for _, f := range [...]string{scope, upstream} {
		l := len(f)
		b = append(b, byte(l>>24), byte(l>>16), byte(l>>8), byte(l))
		b = append(b, f...)
	}
	return b
}

// Scope is the scope of a request: its client session ("s" + edge +
// session) when it has one, else its tenant and endpoint ("t" + tenant +
// view), the scope of a 2026-07-28 stateless client.
func Scope(tenant, edge, session, view string) string {
	if session != "" {
		return "s\x00" + edge + "\x00" + session
	}
	return "t\x00" + tenant + "\x00" + view
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
