// Package provision creates a deployment's KV buckets and streams, and the
// fleet's shared secrets, in one place: tenancy-svc does it at start (and
// on every reconcile, so a server that lost its store gets them back), and
// `switchyard nats provision` as an init step. No other role creates or
// changes a bucket or a stream: they open the existing ones and wait until
// they exist (docs/security.md).
//
// Creating is idempotent: a bucket or stream that exists with the planned
// configuration is left alone; one that exists with another (an older
// config file, a hand-made change) is reported as drift and left alone
// unless the plan is applied with update, which only the admin identity's
// permissions allow (updating a stream can purge it).
package provision

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/audit"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
)

// SecretBytes is the length of every shared secret in [proto.BucketKeys].
const SecretBytes = 32

// EdgeHeartbeat is how often an edge puts its key in [proto.BucketEdges];
// the bucket's TTL is [proto.HeartbeatMisses] of them.
const EdgeHeartbeat = time.Second

// SessionRecordTTL is how long a record of [proto.BucketSessions] lives
// without a write: an edge rewrites a session's record while it is in use
// (its Active time), so only records of sessions left by a dead edge
// reach it.
const SessionRecordTTL = 24 * time.Hour

// Plan is what a deployment needs on its NATS server.
type Plan struct {
	// Replicas is the copies a cluster keeps of each bucket [Ensure]
	// creates: 0 is 3 on a cluster of 3 or more nodes, else 1
	// ([AutoReplicas]); the KV configs' own Replicas are ignored.
	Replicas int
	KV       []jetstream.KeyValueConfig
	Streams  []jetstream.StreamConfig
	// Secrets are the keys of [proto.BucketKeys] to create (random,
	// [SecretBytes] bytes) when absent.
	Secrets []string
	// Fixed are values some of Secrets must have (from configuration:
	// config.TasksFile), by key: created with that value, and set to it
	// when the bucket holds another. Never printed.
	Fixed map[string][]byte `json:"-" yaml:"-"`
}

// Secrets returns the keys of every shared secret.
func Secrets() []string { return []string{proto.KeyTasks, proto.KeyGrants} }

// Buckets returns every KV bucket's configuration.
func Buckets() []jetstream.KeyValueConfig {
	// Each bucket is bounded (total and per value, writes refused past
	// them): an identity that may write one cannot fill the server's
	// store for the others.
	kv := func(b, desc string, maxBytes int64, maxValue int32) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: b, History: 1, Description: desc, MaxBytes: maxBytes, MaxValueSize: maxValue}
	}
	return []jetstream.KeyValueConfig{
		kv(proto.BucketUpstreams, "Switchyard: the upstream catalog (tenancy-svc)", 64<<20, 1<<20),
		kv(proto.BucketLists, "Switchyard: every upstream's lists (upstream-workers)", 1<<30, 8<<20),
		kv(proto.BucketTenants, "Switchyard: tenants and policy (tenancy-svc)", 256<<20, 1<<20),
		kv(proto.BucketAPIKeys, "Switchyard: API key records, hashes only (tenancy-svc)", 256<<20, 64<<10),
		kv(proto.BucketTenancySeeded, "Switchyard: what tenancy-svc seeded from its config", 64<<20, 1<<10),
		kv(proto.BucketKeys, "Switchyard: keys shared by the fleet (task id sealing, route grant MACs)", 1<<20, 1<<10),
		{
			Bucket:      proto.BucketSessions,
			Description: "Switchyard: stateful client sessions, for any edge to serve (edges)",
			History:     1,
			// Records of sessions that ended without their edge (an edge
			// that died) go after a day without use; an edge deletes the
			// others when they end.
			TTL:          SessionRecordTTL,
			MaxBytes:     1 << 30,
			MaxValueSize: 64 << 10,
		},
		{
			Bucket:       proto.BucketEdges,
			Description:  "switchyard: live edges, for fleet-wide limit shares",
			History:      1,
			TTL:          EdgeHeartbeat * proto.HeartbeatMisses,
			Storage:      jetstream.MemoryStorage,
			MaxBytes:     1 << 20,
			MaxValueSize: 1 << 10,
		},
	}
}

// FromFile returns the plan of a config file: every bucket, the secrets,
// and the audit stream when the audit trail is on.
func FromFile(f *config.File) Plan {
	p := Plan{KV: Buckets(), Secrets: Secrets(), Replicas: f.NATS.Replicas}
	if c := f.Audit.PublisherConfig(); c != nil {
		p.Streams = append(p.Streams, c.Stream.JetStreamConfig())
	}
	return p
}

// AutoReplicas is the replicas of a bucket on nc's NATS deployment: 3 on
// a cluster of 3 or more nodes (as many as the connection knows: the
// servers the cluster advertises), else 1.
func AutoReplicas(nc *nats.Conn) int {
	if nc == nil || nc.ConnectedClusterName() == "" {
		return 1
	}
	if len(nc.Servers()) >= 3 {
		return 3
	}
	return 1
}

// Result says what [Ensure] found and did.
type Result struct {
	// Created are the buckets and streams it created.
	Created []string
	// Updated are those it changed (update mode only).
	Updated []string
	// Drift are those that exist with another configuration than planned
	// and were left alone.
	Drift []string
	// Missing are the planned secrets that do not exist and were not
	// created (Options.CreateSecrets off).
	Missing []string
}

// Options say how far [Ensure] goes.
type Options struct {
	// Update changes existing buckets and streams that differ from the
	// plan to it (the admin identity only may).
	Update bool
	// CreateSecrets creates the plan's missing secrets (tenancy-svc only
	// may write them); without it a missing secret is reported in
	// Result.Missing.
	CreateSecrets bool
}

// Ensure creates what p plans and is missing, and, as o says, changes
// what differs and creates missing secrets. It returns every problem
// joined; what succeeded stays done.
func Ensure(ctx context.Context, js jetstream.JetStream, p Plan, o Options) (Result, error) {
	update := o.Update
	var r Result
	var errs []error
	replicas := p.Replicas
	if replicas <= 0 {
		replicas = AutoReplicas(js.Conn())
	}
	for _, c := range p.KV {
		c.Replicas = replicas
		what := "KV " + c.Bucket
		st, err := js.Stream(ctx, proto.KVStream(c.Bucket))
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err := js.CreateKeyValue(ctx, c); err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
				errs = append(errs, fmt.Errorf("create bucket %s: %w", c.Bucket, err))
				continue
			}
			r.Created = append(r.Created, what)
		case err != nil:
			errs = append(errs, fmt.Errorf("bucket %s: %w", c.Bucket, err))
			continue
		case kvDiffers(st.CachedInfo().Config, c) && update:
			if _, err := js.UpdateKeyValue(ctx, c); err != nil {
				errs = append(errs, fmt.Errorf("update bucket %s: %w", c.Bucket, err))
				continue
			}
			r.Updated = append(r.Updated, what)
		case kvDiffers(st.CachedInfo().Config, c):
			r.Drift = append(r.Drift, what)
		}
	}
	for _, c := range p.Streams {
		if c.Replicas <= 0 {
			// Automatic, as the buckets'; an async-persist stream has one
			// (JetStream allows no more).
			c.Replicas = replicas
			if c.PersistMode == jetstream.AsyncPersistMode {
				c.Replicas = 1
			}
		}
		what := "stream " + c.Name
		st, err := js.Stream(ctx, c.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err := js.CreateStream(ctx, c); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				errs = append(errs, fmt.Errorf("create stream %s: %w", c.Name, err))
				continue
			}
			r.Created = append(r.Created, what)
		case err != nil:
			errs = append(errs, fmt.Errorf("stream %s: %w", c.Name, err))
		case streamDiffers(st.CachedInfo().Config, c) && update:
			if slices.Equal(c.Subjects, []string{audit.SubjectAll}) {
				_, err = audit.EnsureStream(ctx, js, streamConfigOf(c))
			} else {
				_, err = js.UpdateStream(ctx, c)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("update stream %s: %w", c.Name, err))
				continue
			}
			r.Updated = append(r.Updated, what)
		case streamDiffers(st.CachedInfo().Config, c):
			r.Drift = append(r.Drift, what)
		}
	}
	if len(p.Secrets) > 0 {
		missing, err := missingSecrets(ctx, js, p.Secrets)
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(missing) > 0 && !o.CreateSecrets:
			for _, k := range missing {
				r.Missing = append(r.Missing, "secret "+proto.BucketKeys+"/"+k)
			}
		case len(missing) > 0 || (len(p.Fixed) > 0 && o.CreateSecrets):
			kv, err := js.KeyValue(ctx, proto.BucketKeys)
			if err != nil {
				errs = append(errs, fmt.Errorf("open bucket %s: %w", proto.BucketKeys, err))
				break
			}
			for _, k := range missing {
				if err := ensureSecret(ctx, kv, k, p.Fixed[k]); err != nil {
					errs = append(errs, err)
					continue
				}
				r.Created = append(r.Created, "secret "+proto.BucketKeys+"/"+k)
			}
			for _, k := range p.Secrets {
				if want := p.Fixed[k]; want != nil && !slices.Contains(missing, k) {
					changed, err := setSecret(ctx, kv, k, want)
					if err != nil {
						errs = append(errs, err)
					} else if changed {
						r.Updated = append(r.Updated, "secret "+proto.BucketKeys+"/"+k)
					}
				}
			}
		}
	}
	return r, errors.Join(errs...)
}

// missingSecrets returns the keys of want that bucket proto.BucketKeys
// does not hold, from the bucket's stream info (its subjects): reading
// them needs no right to read the secrets, which the admin identity has
// not.
func missingSecrets(ctx context.Context, js jetstream.JetStream, want []string) ([]string, error) {
	st, err := js.Stream(ctx, proto.KVStream(proto.BucketKeys))
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", proto.BucketKeys, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+proto.BucketKeys+".>"))
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", proto.BucketKeys, err)
	}
	var missing []string
	for _, k := range want {
		if info.State.Subjects["$KV."+proto.BucketKeys+"."+k] == 0 {
			missing = append(missing, k)
		}
	}
	return missing, nil
}

// kvDiffers reports whether a bucket's stream differs from c in what the
// plan sets.
func kvDiffers(have jetstream.StreamConfig, c jetstream.KeyValueConfig) bool {
	hist := int64(max(c.History, 1))
	maxBytes, maxValue := c.MaxBytes, c.MaxValueSize
	if maxBytes == 0 {
		maxBytes = -1
	}
	if maxValue == 0 {
		maxValue = -1
	}
	return have.MaxMsgsPerSubject != hist || have.MaxAge != c.TTL || have.Storage != c.Storage ||
		have.Description != c.Description || have.MaxBytes != maxBytes || have.MaxMsgSize != maxValue
}

// streamDiffers reports whether a stream differs from c in what the plan
// sets (persist mode aside: JetStream never changes it).
func streamDiffers(have, c jetstream.StreamConfig) bool {
	return !slices.Equal(have.Subjects, c.Subjects) || have.MaxAge != c.MaxAge || have.MaxBytes != c.MaxBytes ||
		have.MaxMsgs != c.MaxMsgs || have.MaxMsgSize != c.MaxMsgSize || have.Replicas != c.Replicas ||
		have.Storage != c.Storage || have.Retention != c.Retention || have.Discard != c.Discard ||
		have.AllowDirect != c.AllowDirect || have.Description != c.Description
}

// streamConfigOf turns a planned audit stream back into the audit
// package's shape, so that an update keeps its rules (persist mode).
func streamConfigOf(c jetstream.StreamConfig) audit.StreamConfig {
	return audit.StreamConfig{
		Name: c.Name, MaxAge: nonZero(c.MaxAge), MaxBytes: c.MaxBytes, MaxMsgs: c.MaxMsgs,
		Replicas: c.Replicas, AsyncWrites: c.PersistMode == jetstream.AsyncPersistMode,
	}
}

// nonZero maps JetStream's "no age limit" (0) to the audit package's (-1).
func nonZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// ensureSecret creates key k with random bytes unless it exists.
func ensureSecret(ctx context.Context, kv jetstream.KeyValue, k string, fixed []byte) error {
	b := fixed
	if b == nil {
		b = make([]byte, SecretBytes)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		defer clear(b)
	}
	_, err := kv.Create(ctx, k, b)
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("create secret %s/%s: %w", proto.BucketKeys, k, err)
	}
	return nil
}

// setSecret puts want under k unless k holds it already; it reports
// whether it changed the value.
func setSecret(ctx context.Context, kv jetstream.KeyValue, k string, want []byte) (bool, error) {
	e, err := kv.Get(ctx, k)
	if err == nil && bytes.Equal(e.Value(), want) {
		return false, nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, fmt.Errorf("read secret %s/%s: %w", proto.BucketKeys, k, err)
	}
	if _, err := kv.Put(ctx, k, want); err != nil {
		return false, fmt.Errorf("set secret %s/%s: %w", proto.BucketKeys, k, err)
	}
	return true, nil
}
