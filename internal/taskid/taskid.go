// Package taskid mints and opens the task ids clients see for the tasks of
// upstream servers (the MCP tasks extension, io.modelcontextprotocol/tasks,
// SEP-2663).
//
// An upstream's own task ids live in the upstream's namespace, which every
// client of the gateway shares (a worker talks to it under one identity),
// so a client must never see or guess one. The gateway hands out instead
//
//	sy1.<base64url(upstream)>.<base64url(upstream task id)>.<base64url(mac)>
//
// where mac is a truncated HMAC-SHA256, under a key every worker shares, of
// the upstream, the upstream's task id and the scope that created the task:
// the client session (2025-era sessions) or the tenant and endpoint
// (2026-07-28 stateless requests). Opening an id under any other scope
// fails, so a task is reachable only from where it was created, and ids
// carry no state: any worker opens any id, with no store to write before
// the CreateTaskResult goes out. Routers read the upstream without the
// key ([Upstream]) to choose a worker; workers verify ([Codec.Open]).
package taskid

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// prefix starts every gateway task id; the "1" versions the format.
const prefix = "sy1."

// macLen is how many bytes of the HMAC an id keeps (128 bits).
const macLen = 16

// KeyLen is the length of a Codec key in bytes.
const KeyLen = 32

var b64 = base64.RawURLEncoding

// Codec mints and opens gateway task ids under one key. It is immutable and
// safe for concurrent use.
type Codec struct {
	key []byte
}

// New returns a Codec for key (at least 16 bytes).
func New(key []byte) (*Codec, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("taskid: key of %d bytes, want at least 16", len(key))
	}
	return &Codec{key: append([]byte(nil), key...)}, nil
}

// Mint returns the gateway id of upstream's task id, bound to scope.
func (c *Codec) Mint(scope, upstream, id string) string {
	mac := c.mac(scope, upstream, id)
	var b strings.Builder
	b.Grow(len(prefix) + b64.EncodedLen(len(upstream)) + b64.EncodedLen(len(id)) + b64.EncodedLen(macLen) + 2)
	b.WriteString(prefix)
	b.WriteString(b64.EncodeToString([]byte(upstream)))
	b.WriteByte('.')
	b.WriteString(b64.EncodeToString([]byte(id)))
	b.WriteByte('.')
	b.WriteString(b64.EncodeToString(mac))
	return b.String()
}

// Open returns the upstream and the upstream's task id of gid; ok is false
// when gid is not a gateway id, or was minted under another scope or key.
func (c *Codec) Open(scope, gid string) (upstream, id string, ok bool) {
	upstream, id, mac, ok := split(gid)
	if !ok || !hmac.Equal(mac, c.mac(scope, upstream, id)) {
		return "", "", false
	}
	return upstream, id, true
}

// Upstream returns the upstream named in gid, unverified: enough to route a
// request to a worker of it, which then opens gid.
func Upstream(gid string) (string, bool) {
	u, _, _, ok := split(gid)
	return u, ok
}

func split(gid string) (upstream, id string, mac []byte, ok bool) {
	rest, found := strings.CutPrefix(gid, prefix)
	if !found {
		return "", "", nil, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return "", "", nil, false
	}
	u, err1 := b64.DecodeString(parts[0])
	i, err2 := b64.DecodeString(parts[1])
	m, err3 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || len(u) == 0 || len(m) != macLen {
		return "", "", nil, false
	}
	return string(u), string(i), m, true
}

// mac is the truncated HMAC of the three fields, each length-prefixed so
// that no two field lists share an input.
func (c *Codec) mac(scope, upstream, id string) []byte {
	h := hmac.New(sha256.New, c.key)
	for _, f := range [...]string{scope, upstream, id} {
		var n [4]byte
		l := len(f)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return h.Sum(nil)[:macLen]
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
	Bucket   = "switchyard_keys"
	KeyTasks = "tasks"
)

// Shared returns the Codec of the fleet: the key stored in KV bucket
// [Bucket] under [KeyTasks], created (random, [KeyLen] bytes) by the first
// role to ask. Every worker of a deployment gets the same key, so an id one
// minted opens on any other. Errors are JetStream's.
func Shared(ctx context.Context, js jetstream.JetStream) (*Codec, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, History: 1,
		Description: "Switchyard: keys shared by the fleet (task id MACs)"})
	if err != nil {
		return nil, fmt.Errorf("taskid: bucket %s: %w", Bucket, err)
	}
	key := make([]byte, KeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if _, err := kv.Create(ctx, KeyTasks, key); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("taskid: create key: %w", err)
		}
		e, err := kv.Get(ctx, KeyTasks)
		if err != nil {
			return nil, fmt.Errorf("taskid: read key: %w", err)
		}
		key = e.Value()
	}
	return New(key)
}
