package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/proto"
)

// ErrNotProvisioned wraps the error of a bucket or secret that does not
// exist yet: tenancy-svc (or switchyard nats provision) creates them, no
// other role does (docs/security.md).
var ErrNotProvisioned = errors.New("not provisioned yet (tenancy-svc or switchyard nats provision creates it)")

// Bucket opens the KV bucket name. It never creates it: a bucket that does
// not exist yet is an error wrapping [ErrNotProvisioned] and
// jetstream.ErrBucketNotFound.
func Bucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("bucket %s: %w: %w", name, ErrNotProvisioned, err)
	case err != nil:
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	return kv, nil
}

// Secret returns the shared secret key of bucket proto.BucketKeys, waiting
// (with backoff, up to 2 s between tries) until it exists or ctx ends;
// the first miss is logged once at info, so an operator sees what the role
// waits for. The returned slice is the caller's.
func Secret(ctx context.Context, js jetstream.JetStream, key string, log *slog.Logger) ([]byte, error) {
	backoff := 50 * time.Millisecond
	logged := false
	for {
		v, err := secretOnce(ctx, js, key)
		if err == nil {
			return v, nil
		}
		if !logged && log != nil {
			log.Info("waiting for a shared secret", "what", proto.BucketKeys+"/"+key, proto.LogErr, err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("secret %s/%s: %w", proto.BucketKeys, key, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// FollowSecret reads the shared secret key every interval until ctx ends
// and calls changed with its value each time it differs from last (the
// value the caller holds; changed's slice is its own). After the NATS
// store is lost tenancy-svc makes the secrets again: every role that
// follows them moves to the new ones, so the fleet agrees again.
func FollowSecret(ctx context.Context, js jetstream.JetStream, key string, last []byte, interval time.Duration, changed func([]byte)) {
	last = bytes.Clone(last)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := secretOnce(ctx, js, key)
		if err != nil || bytes.Equal(v, last) {
			continue
		}
		last = bytes.Clone(v)
		changed(v)
	}
}

// SecretFollowInterval is how often the roles read the fleet's secrets
// again ([FollowSecret]).
const SecretFollowInterval = 5 * time.Second

func secretOnce(ctx context.Context, js jetstream.JetStream, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := Bucket(ctx, js, proto.BucketKeys)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrNotProvisioned, err)
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// KVEvent is one change seen by [Watch]: a put (Value set) or a delete.
type KVEvent struct {
	Key     string
	Value   []byte
	Deleted bool
}

// Watch opens bucket (waiting until it is provisioned) and calls fn with every current value,
// then with initial=true once the current values have been delivered, then
// with every change, until ctx ends. fn runs on the calling goroutine. If
// JetStream is unavailable it retries with backoff instead of failing, so a
// role can start before the server is fully ready.
func Watch(ctx context.Context, js jetstream.JetStream, bucket string, fn func(ev *KVEvent, initial bool)) error {
	backoff := 100 * time.Millisecond
	for {
		err := watchOnce(ctx, js, bucket, fn)
		if ctx.Err() != nil {
			return nil
		}
		_ = err // retried below; the caller's readiness reports the gap
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func watchOnce(ctx context.Context, js jetstream.JetStream, bucket string, fn func(*KVEvent, bool)) error {
	kv, err := Bucket(ctx, js, bucket)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if e == nil {
				fn(nil, true)
				continue
			}
			ev := &KVEvent{Key: e.Key(), Value: e.Value()}
			ev.Deleted = e.Operation() != jetstream.KeyValuePut
			fn(ev, false)
		}
	}
}
